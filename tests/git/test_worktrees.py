"""`mam-agent --worktree`: each job in a git worktree and branch of its own, over a real `mam up`.

The agent is a plain shell (`sh -s`: the prompt is its script), so each job
does with git exactly what its prompt says.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import msgspec
import pytest
from runner_support import submit
from worktrees_support import AGENT_GIT, _runners, checkout_state, git, make_repo, served

from mam.contract.events import GitInfo, decode_event, encode_event
from mam.contract.record import JobRecord, Status, decode_record, encode_record
from mam.git.job_tree import parse_shortstat

from e2e import workspace_id
from support import BIN, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths


def wait_both(me: str, other: str, sync: Path) -> str:
    """Shell: mark `me` done, then wait (up to 20 s) until `other` is too: both jobs run at once or both fail."""
    return (
        f"touch {sync}/{me}; i=0; while [ ! -e {sync}/{other} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); "
        f"done; test -e {sync}/{other}"
    )


async def test_two_jobs_at_once_commit_on_their_own_branches_and_the_checkout_is_untouched(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    head = make_repo(ws.root)
    (ws.root / "a.txt").write_text("the user's unstaged edit\n")
    (ws.root / "staged.txt").write_text("the user's staged file\n")
    git(ws.root, "add", "staged.txt")
    before = checkout_state(ws.root)
    sync = tmp_path / "sync"
    sync.mkdir()
    ws_id = workspace_id(ws.root)
    async with served(ws, ("sh", ("--concurrency", "2"))) as url:
        for me, other in (("job-a", "job-b"), ("job-b", "job-a")):
            script = (
                f"set -e; pwd; test \"$(cat a.txt)\" = one; echo 'content of {me}' > same.txt; "
                f"{AGENT_GIT} add same.txt; {AGENT_GIT} commit -q -m 'from {me}'; {wait_both(me, other, sync)}"
            )
            await submit(url, ws, me, script, agent="sh")
        records = {
            job: await wait_for_state(url, ws_id, job, lambda r: r["status"] in ("succeeded", "failed"), timeout=60)
            for job in ("job-a", "job-b")
        }
    for job, record in records.items():
        assert record["status"] == "succeeded", record
        assert record["result"].strip() == str(ws.root / ".mam" / "worktrees" / job), "the agent ran in its worktree"
        branch_head = git(ws.root, "rev-parse", f"mam/{job}")
        assert git(ws.root, "show", f"mam/{job}:same.txt") == f"content of {job}"
        assert git(ws.root, "log", "-1", "--format=%an %s", f"mam/{job}") == f"agent from {job}"
        assert git(ws.root, "rev-parse", f"mam/{job}~1") == head
        assert record["git_at_finish"] == {
            "commit": branch_head,
            "branch": f"mam/{job}",
            "dirty": False,
            "base": head,
            "files_changed": 1,
            "insertions": 1,
            "deletions": 0,
        }
        assert not (ws.root / ".mam" / "worktrees" / job).exists(), "a succeeded job's worktree is removed"
    assert checkout_state(ws.root) == before, "the user's checkout, index and branch are as they were"
    assert git(ws.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    shown = await run(mam("show", "job-a", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    base, commit = records["job-a"]["git_at_finish"]["base"], records["job-a"]["git_at_finish"]["commit"]
    assert "branch mam/job-a: 1 file changed, 1 insertion(+), 0 deletions(-)" in text
    review = f"git diff {base}..{commit}"
    assert f"review: {review}" in text
    diff = subprocess.run([*review.split(), "--", "same.txt"], cwd=ws.root, capture_output=True, text=True, check=True)
    assert "+content of job-a" in diff.stdout


async def test_work_left_uncommitted_is_committed_to_the_branch_by_mam(ws: WorkspacePaths) -> None:
    head = make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    script = "echo changed > a.txt; echo new > new.txt; mkdir -p sub; echo deep > sub/deep.txt; echo noise > debug.log"
    async with served(ws, ("sh", ("--keep-worktree", "always"))) as url:
        await submit(url, ws, "job-u", script, agent="sh")
        record = await wait_for_state(url, ws_id, "job-u", lambda r: r["status"] == "succeeded", timeout=60)
    tip = git(ws.root, "rev-parse", "mam/job-u")
    assert record["git_at_finish"] == {
        "commit": tip,
        "branch": "mam/job-u",
        "dirty": True,
        "base": head,
        "files_changed": 3,
        "insertions": 3,
        "deletions": 1,
    }
    assert (
        git(ws.root, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "mam/job-u")
        == "mam <mam@localhost>|mam <mam@localhost>"
    )
    assert git(ws.root, "rev-parse", "mam/job-u~1") == head
    committed = git(ws.root, "diff", "--name-status", f"{head}..mam/job-u").splitlines()
    assert committed == ["M\ta.txt", "A\tnew.txt", "A\tsub/deep.txt"], "ignored files stay out of the commit"
    tree = ws.root / ".mam" / "worktrees" / "job-u"
    assert (tree / "debug.log").read_text() == "noise\n", "--keep-worktree always keeps a succeeded job's worktree"
    assert git(tree, "status", "--porcelain") == ""
    assert git(ws.root, "rev-parse", "--abbrev-ref", "HEAD") == "main" and (ws.root / "a.txt").read_text() == "one\n"


async def test_keep_worktree_failed_keeps_a_failed_job_and_never_removes_it_but_not_its_branch(
    ws: WorkspacePaths,
) -> None:
    head = make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    failing = "echo half-done > work.txt; exit 3"
    async with served(ws, ("keep", ()), ("drop", ("--keep-worktree", "never"))) as url:
        await submit(url, ws, "job-k", failing, agent="keep")
        await submit(url, ws, "job-n", failing, agent="drop")
        for job in ("job-k", "job-n"):
            record = await wait_for_state(url, ws_id, job, lambda r: r["status"] == "failed", timeout=60)
            assert record["exit_code"] == 3
            assert record["git_at_finish"]["dirty"] is True and record["git_at_finish"]["base"] == head
            assert record["git_at_finish"]["files_changed"] == 1
            assert git(ws.root, "show", f"mam/{job}:work.txt") == "half-done", "the branch holds the failed job's work"
    assert (ws.root / ".mam" / "worktrees" / "job-k" / "work.txt").is_file(), (
        "default policy: a failed job's worktree stays"
    )
    assert not (ws.root / ".mam" / "worktrees" / "job-n").exists(), "--keep-worktree never removes it"
    listed = git(ws.root, "worktree", "list", "--porcelain")
    assert "job-k" in listed and "job-n" not in listed


def agent_cli(ws: WorkspacePaths, *args: str) -> list[str]:
    return [str(BIN / "mam-agent"), "--agent", "sh", "--workspace", str(ws.root), *args]


async def test_worktree_refuses_a_workspace_that_is_not_a_git_repository(ws: WorkspacePaths) -> None:
    result = await run(agent_cli(ws, "--command", "sh -s", "--worktree"), cwd=ws.elsewhere)
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1, result.stderr
    assert f"workspace {ws.root} is not in a git repository".encode() in result.stderr
    assert not (ws.root / ".mam").exists()
    git(ws.root, "init", "-q", "-b", "main")
    empty = await run(agent_cli(ws, "--command", "sh -s", "--worktree"), cwd=ws.elsewhere)
    assert empty.returncode == 2 and b"has no commit yet" in empty.stderr and empty.stderr.count(b"\n") == 1


async def test_a_profile_asks_for_worktrees_and_no_worktree_overrides_it(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text(json.dumps({"iso": {"argv": ["sh", "-s"], "worktree": True}}))
    by_profile = await run(agent_cli(ws, "--profile", "iso"), cwd=ws.elsewhere)
    assert by_profile.returncode == 2 and b"not in a git repository" in by_profile.stderr, by_profile.stderr
    overridden = await run(agent_cli(ws, "--profile", "iso", "--no-worktree"), cwd=ws.elsewhere)
    assert overridden.returncode == 2 and b"no projector key" in overridden.stderr, overridden.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--worktree", "--keep-worktree", "sometimes"], b"--keep-worktree: invalid choice: 'sometimes'"),
        (["--keep-worktree", "never"], b"--keep-worktree never: jobs run without a worktree; add --worktree"),
    ],
)
async def test_keep_worktree_usage_errors_are_one_line(ws: WorkspacePaths, args: list[str], says: bytes) -> None:
    make_repo(ws.root)
    result = await run(agent_cli(ws, "--command", "sh -s", *args), cwd=ws.elsewhere)
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1 and says in result.stderr, result.stderr


@pytest.mark.fast
def test_git_info_written_before_the_worktree_keys_keeps_its_bytes() -> None:
    """The new keys are UNSET unless a worktree job reports them: old events and records re-encode byte for byte."""
    for old in (b'{"commit":"abc1234","branch":"main","dirty":true}', b'{"commit":null,"branch":null,"dirty":false}'):
        assert msgspec.json.encode(msgspec.json.decode(old, type=GitInfo)) == old
    event = (
        b'{"type":"succeeded","v":1,"id":"e1","ts":null,"by":null,"job_id":null,"expected_version":null,'
        b'"exit_code":0,"result":"ok","git":{"commit":"abc1234","branch":"main","dirty":false}}'
    )
    assert b',"git":{"commit":"abc1234","branch":"main","dirty":false},' in encode_event(decode_event(event))
    submitted = GitInfo(commit="abc1234", branch="main", dirty=True)
    record = JobRecord(
        job_id="j",
        workspace="w",
        status=Status.SUCCEEDED,
        agent="a",
        prompt="p",
        submitted_at="2024-01-01T00:00:00Z",
        updated_at="2024-01-01T00:00:00Z",
        git_at_submit=submitted,
    )
    assert b'"git_at_submit":{"commit":"abc1234","branch":"main","dirty":true},"git_at_finish":null' in encode_record(
        record
    )
    finished = GitInfo(commit="abc1234", branch="mam/j", base="0123456789", files_changed=2, insertions=5, deletions=0)
    done = msgspec.structs.replace(record, git_at_finish=finished)
    assert (
        b'"git_at_finish":{"commit":"abc1234","branch":"mam/j","dirty":false,"base":"0123456789",'
        b'"files_changed":2,"insertions":5,"deletions":0}' in encode_record(done)
    )
    assert decode_record(encode_record(done)) == done


@pytest.mark.fast
@pytest.mark.parametrize(
    ("line", "counts"),
    [
        ("", (0, 0, 0)),
        (" 1 file changed, 1 insertion(+)", (1, 1, 0)),
        (" 3 files changed, 12 insertions(+), 4 deletions(-)", (3, 12, 4)),
        (" 2 files changed, 7 deletions(-)", (2, 0, 7)),
    ],
)
def test_parse_shortstat(line: str, counts: tuple[int, int, int]) -> None:
    assert parse_shortstat(line) == counts


async def test_a_job_starts_from_the_commit_recorded_at_submit_else_from_head(ws: WorkspacePaths) -> None:
    first = make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    async with served(ws) as url:
        await submit(url, ws, "job-old", "cat a.txt", agent="sh")  # queued: no runner yet
        (ws.root / "a.txt").write_text("two\n")
        git(ws.root, "commit", "-q", "-am", "two")
        second = git(ws.root, "rev-parse", "HEAD")
        unknown = {"type": "submitted", "prompt": "cat a.txt", "agent": "sh", "git": {"commit": "f" * 40}}
        await publish(url, f"mam/{ws_id}/jobs/job-unknown/events", json.dumps(unknown).encode())
        async with _runners(url, ws, [("sh", ())]):
            old = await wait_for_state(url, ws_id, "job-old", lambda r: r["status"] == "succeeded", timeout=60)
            new = await wait_for_state(url, ws_id, "job-unknown", lambda r: r["status"] == "succeeded", timeout=60)
    assert old["git_at_submit"]["commit"] == first and old["git_at_finish"]["base"] == first
    assert old["result"] == "one\n", "the job saw the tree of the commit recorded at submit"
    assert new["git_at_finish"]["base"] == second and new["result"] == "two\n", "an unknown commit: from HEAD"
    assert new["git_at_finish"]["files_changed"] == 0 and new["git_at_finish"]["commit"] == second


async def test_a_cancelled_job_keeps_its_work_on_its_branch(ws: WorkspacePaths, tmp_path: Path) -> None:
    make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    started = tmp_path / "started"
    async with served(ws, ("sh", ("--keep-worktree", "never"))) as url:
        await submit(url, ws, "job-c", f"echo partial > p.txt; touch {started}; exec sleep 60", agent="sh")
        await wait_for_state(url, ws_id, "job-c", lambda r: r["status"] == "running", timeout=60)
        with anyio.fail_after(30):
            while not started.exists():  # the agent has written its file (a file the test waits on, not a sleep)
                await anyio.sleep(0.05)  # polling for a file the job writes
        cancelled = await run(
            mam("cancel", "job-c", "--wait", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert cancelled.returncode == 0, cancelled.stderr
        await wait_for_state(url, ws_id, "job-c", lambda r: r["status"] == "cancelled", timeout=30)
    assert git(ws.root, "show", "mam/job-c:p.txt") == "partial"
    assert not (ws.root / ".mam" / "worktrees" / "job-c").exists()


async def test_a_later_attempt_goes_on_from_its_earlier_attempts_branch(ws: WorkspacePaths) -> None:
    """A retried (or released) worktree job finds its branch: the next attempt runs on `mam/<id>` with
    what the earlier one left, in the worktree kept for it (default policy) or in a new one (`never`),
    instead of failing on a branch that already exists."""
    make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    twice = "if [ -f step.txt ]; then echo second >> step.txt; else echo first > step.txt; exit 3; fi"
    async with served(ws, ("keep", ()), ("drop", ("--keep-worktree", "never"))) as url:
        await submit(url, ws, "job-k2", twice, "--retries", "1", "--backoff", "0", agent="keep")
        await submit(url, ws, "job-n2", twice, "--retries", "1", "--backoff", "0", agent="drop")
        for job in ("job-k2", "job-n2"):
            record = await wait_for_state(
                url, ws_id, job, lambda r: r["status"] in {"succeeded", "failed", "lost"}, timeout=60
            )
            assert record["status"] == "succeeded" and record["attempt"] == 2, record.get("error")
            assert [a["status"] for a in record["attempts"]] == ["failed", "succeeded"]
            assert git(ws.root, "show", f"mam/{job}:step.txt") == "first\nsecond", (
                "the second attempt saw the first's work"
            )
