"""Review and landing act only on a job's own branch `mam/<job id>` (issue 29), over a real `mam up`.

A hostile client runs its own job by hand (a claim naming its own runner key, then signed `started`
and `succeeded` through the broker) and says in `succeeded` that the job's work is on a branch of
the user's (`git.branch: "feature-x"`). `mam diff`, `mam merge`, `mam discard`, `mam worktrees
--clean` and the dashboard's routes refuse it in one line naming the job and the branch, and the
user's branch keeps its commit. An agent that checks out the user's branch in its worktree gets
nothing committed there by mam, and its record names the job's own branch.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from dashboard_landing_support import post
from hypothesis import given, settings
from hypothesis import strategies as st
from landing_support import has_branch, mam_cli, run_jobs, user_repo
from runner_support import submit
from worktrees_support import AGENT_GIT, checkout_state, git, served

from mam.contract import events as ev
from mam.contract.identity import RunnerKey
from mam.contract.ids import JOB_ID_PATTERN
from mam.git.job_ref import branch_ok, foreign_branch, own_branch

from e2e import workspace_id
from support import publish, wait_for_state
from workspace_support import WorkspacePaths

HOSTILE = {  # job id -> the branch its record names: the user's, another job's, an option to git, a range
    "h-user": "feature-x",
    "h-other": "mam/victim",
    "h-option": "--output=written-by-git",  # git -C TOP diff would write TOP/written-by-git
    "h-range": "mam/h-range/../feature-x",
}


def user_branches(root: Path) -> tuple[str, str]:
    """The user's repository: main, and a branch `feature-x` with a commit of its own, and a branch
    `mam/victim` (another job's work); (main's head, feature-x's head)."""
    head = user_repo(root)
    git(root, "checkout", "-q", "-b", "feature-x")
    (root / "feature.txt").write_text("the user's feature\n")
    git(root, "add", "feature.txt")
    git(root, "commit", "-q", "-m", "the user's feature")
    feature = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    git(root, "branch", "mam/victim", "feature-x")
    return head, feature


async def run_by_hand(url: str, ws: WorkspacePaths, job: str, git_info: ev.GitInfo) -> dict:
    """The hostile client: submit `job` for an agent no runner serves, claim it with a key of its own,
    start it and publish its `succeeded` naming `git_info`, each signed as a runner signs; its record."""
    ws_id = workspace_id(ws.root)
    await submit(url, ws, job, "true", agent="nobody-runs-this")
    key = RunnerKey()
    topic = f"mam/{ws_id}/jobs/{job}/events"
    steps: list[tuple[ev.AnyEvent, str]] = [
        (ev.Claimed(id=f"{job}-c", runner="hostile", epoch="e1", expected_version=1, runner_key=key.public), "claimed"),
        (ev.Started(id=f"{job}-s", runner="hostile", pid=1), "running"),
        (ev.Succeeded(id=f"{job}-d", exit_code=0, git=git_info), "succeeded"),
    ]
    record: dict = {}
    for event, status in steps:
        await publish(url, topic, key.sign_event(job, ev.encode_event(event)))
        record = await wait_for_state(url, ws_id, job, lambda r, status=status: r["status"] == status)
    return record


async def hostile_jobs(url: str, ws: WorkspacePaths, jobs: dict[str, str], base: str, feature: str) -> None:
    for job, branch in jobs.items():
        record = await run_by_hand(
            url,
            ws,
            job,
            ev.GitInfo(commit=feature, branch=branch, base=base, files_changed=1, insertions=1, deletions=0),
        )
        assert record["git_at_finish"]["branch"] == branch, "the record keeps what the client said"


def refused_line(result: subprocess.CompletedProcess[bytes], job: str, branch: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.count(b"\n") == 1, result.stderr
    line = result.stderr.decode()
    assert f"job {job}'s record names branch '{branch}', not its own mam/{job}: refused" in line, line


@pytest.mark.slow
async def test_a_record_naming_a_branch_not_the_jobs_own_is_refused_and_the_users_branches_stay(
    ws: WorkspacePaths,
) -> None:
    base, feature = user_branches(ws.root)
    jobs = HOSTILE
    async with served(ws) as url:
        await hostile_jobs(url, ws, jobs, base, feature)
    before = checkout_state(ws.root)
    for job, branch in jobs.items():
        for command in (
            ("diff", job),
            ("diff", "--stat", job),
            ("merge", job),
            ("merge", "--squash", job),
            ("discard", job),
        ):
            refused_line(await mam_cli(ws, *command), job, branch)
    assert git(ws.root, "rev-parse", "feature-x") == feature and git(ws.root, "rev-parse", "mam/victim") == feature
    assert checkout_state(ws.root) == before, "HEAD, index, status and files are as they were"
    assert not (ws.root / "written-by-git").exists(), "no recorded value reached git as an option"
    cleaned = await mam_cli(ws, "worktrees", "--clean", "--json")
    assert cleaned.returncode == 0 and json.loads(cleaned.stdout)["cleaned"] == [], cleaned
    assert git(ws.root, "rev-parse", "feature-x") == feature and git(ws.root, "rev-parse", "mam/victim") == feature
    shown = await mam_cli(ws, "show", "h-user")
    assert (
        "branch feature-x: not the job's own branch mam/h-user; mam diff, merge and discard refuse it"
        in shown.stdout.decode()
    ), shown.stdout


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_the_dashboards_diff_merge_and_discard_refuse_a_foreign_branch(ws: WorkspacePaths) -> None:
    from dashboard_support import up_with_dashboard

    base, feature = user_branches(ws.root)
    async with up_with_dashboard(ws) as (url, page_url):
        await run_by_hand(url, ws, "h-web", ev.GitInfo(commit=feature, branch="feature-x", base=base))
        api = page_url.rstrip("/") + "/api/jobs/h-web"
        answers = [post(f"{api}/{action}", "application/json") for action in ("merge", "discard")]
        diff_status, diff_body = get(f"{api}/diff")
    for status, body in answers:
        assert (
            status == 409 and "job h-web's record names branch 'feature-x', not its own mam/h-web" in body["error"]
        ), (status, body)
    assert diff_status == 409 and "'feature-x'" in diff_body["error"]
    assert git(ws.root, "rev-parse", "feature-x") == feature, "the user's branch keeps its commit"


async def test_an_agent_that_checks_out_the_users_branch_gets_nothing_committed_there(ws: WorkspacePaths) -> None:
    base, feature = user_branches(ws.root)
    script = f"{AGENT_GIT} checkout -q feature-x; echo left > left.txt"
    async with served(ws, ("sh", ())) as url:
        records = await run_jobs(url, ws, {"job-own": "echo own > own.txt"})
        await submit(url, ws, "job-away", script, agent="sh")
        away = await wait_for_state(
            url, workspace_id(ws.root), "job-away", lambda r: r["status"] == "succeeded", timeout=60
        )
    assert git(ws.root, "rev-parse", "feature-x") == feature, "mam committed nothing on the user's branch"
    assert away["git_at_finish"]["branch"] == "mam/job-away" and away["git_at_finish"]["dirty"] is True
    assert away["git_at_finish"]["commit"] == base, "the job's own branch holds nothing"
    tree = ws.root / ".mam" / "worktrees" / "job-away"
    assert (tree / "left.txt").read_text() == "left\n", "what the agent left stays in its kept worktree"
    assert records["job-own"]["git_at_finish"]["branch"] == "mam/job-own"
    merged = await mam_cli(ws, "merge", "job-own")  # the job's own branch still lands
    assert merged.returncode == 0 and "merged job job-own into main" in merged.stdout.decode(), merged
    assert not has_branch(ws.root, "job-own") and (ws.root / "own.txt").read_text() == "own\n"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("named", "foreign"),
    [
        (None, None),
        ("mam/j1", None),
        ("feature-x", "feature-x"),
        ("mam/j2", "mam/j2"),
        ("mam/j1/x", "mam/j1/x"),
        ("-D", "-D"),
        ("main", "main"),
    ],
)
def test_foreign_branch_is_anything_but_the_jobs_own(named: str | None, foreign: str | None) -> None:
    assert foreign_branch("j1", named) == foreign and own_branch("j1") == "mam/j1"


@settings(max_examples=60, deadline=None)
@given(
    st.from_regex(JOB_ID_PATTERN.removesuffix(r"$(?!\n)"), fullmatch=True)
    | st.sampled_from(["a..b", "a.", "a.lock", "a.lock.b", "a-", "1", "a_b.c"])
)
def test_branch_ok_says_what_git_check_ref_format_says(job_id: str) -> None:
    takes = subprocess.run(["git", "check-ref-format", "--branch", f"mam/{job_id}"], capture_output=True)
    assert branch_ok(job_id) == (takes.returncode == 0), job_id
