"""A runner on "another machine" (`mam-agent --push REMOTE`), on one machine: separate clones and a bare remote.

Machine A is the workspace: clone A with `mam up` on a free port. Machine B is
another directory with its own clone of the same bare repository and its own
`mam-agent --agent shell --push ...`, told A's broker, A's workspace id and the
fingerprint of A's projector key (what `mam workspace --json` in A prints), as
docs/remote-runners.md sets it up. The shell agent's prompt is its script; the
runner commits what it leaves to the job's branch.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from dashboard_support import up_with_dashboard
from landing_support import user_repo
from runner_support import submit
from worktrees_support import git, runner_env

from brokers import free_port, wait_for_port
from e2e import up_with_flags, workspace_id
from support import BIN, CHECKOUT, Daemon, Watch, child_env, mam, run, wait_for_state, wait_projector_online
from workspace_support import WorkspacePaths

DONE = ("succeeded", "failed", "cancelled", "timed_out", "lost")


@dataclass(frozen=True)
class Machines:
    """The bare remote, clone A (the workspace: `ws.root`) and clone B (the other machine's)."""

    bare: Path
    a: Path
    b: Path


def two_clones(ws: WorkspacePaths, tmp_path: Path) -> Machines:
    """A bare repository on branch main, the workspace's clone A (with a commit pushed) and clone B of it."""
    bare = tmp_path / "shared" / "project.git"
    bare.parent.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    user_repo(ws.root)
    git(ws.root, "remote", "add", "origin", str(bare))
    git(ws.root, "push", "-q", "origin", "main")
    b = tmp_path / "machine-b" / "project"
    b.parent.mkdir()
    git(b.parent, "clone", "-q", str(bare), str(b))
    return Machines(bare=bare, a=ws.root, b=b)


def commit_in_a(machines: Machines, name: str, text: str, *, push: bool) -> str:
    """A new commit in clone A adding `name` (pushed to the remote if `push`); its sha."""
    (machines.a / name).write_text(text)
    git(machines.a, "add", name)
    git(machines.a, "commit", "-q", "-m", f"add {name}")
    if push:
        git(machines.a, "push", "-q", "origin", "main")
    return git(machines.a, "rev-parse", "HEAD")


def has_commit(root: Path, sha: str) -> bool:
    return (
        subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True).returncode
        == 0
    )


async def workspace_info(ws: WorkspacePaths) -> dict:
    """`mam workspace --json` in A: the id and projector key fingerprint machine B's runner is told."""
    shown = await run(mam("workspace", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


@asynccontextmanager
async def runner_on_b(
    url: str, ws: WorkspacePaths, machines: Machines, push: str, *, clone: Path | None = None, name: str = "far-runner"
) -> AsyncIterator[Daemon]:
    """`mam-agent --agent shell --push PUSH` in clone B (or `clone`) for A's workspace and broker, once online."""
    info = await workspace_info(ws)
    clone = clone or machines.b
    cmd = [
        str(BIN / "mam-agent"),
        "--agent",
        "shell",
        "--push",
        push,
        "--broker",
        url,
        "--workspace",
        str(clone),
        "--workspace-id",
        info["id"],
        "--projector-key",
        info["projector_key"],
        "--agent-id",
        name,
        "--heartbeat",
        "0.5",
        "--kill-grace",
        "1",
        "--drain-timeout",
        "0",
    ]
    log = clone.parent / f"{name}.log"
    daemon = Daemon(cmd, cwd=clone.parent, env=runner_env(clone.parent), log=log)
    try:
        async with Watch(url, f"mam/{info['id']}/agents/{name}/status") as status:
            await status.json(lambda s: s["status"] == "online" and s["pid"] == daemon.pid, timeout=20)
        yield daemon
    finally:
        daemon.stop()


async def ended(url: str, ws: WorkspacePaths, job: str) -> dict:
    return await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] in DONE, timeout=60)


async def mam_in_a(ws: WorkspacePaths, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)


def ls_remote(bare: Path, branch: str) -> str:
    out = subprocess.run(
        ["git", "ls-remote", str(bare), f"refs/heads/{branch}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0] if out else ""


def http_json(address: str) -> dict:
    with urllib.request.urlopen(address, timeout=30) as response:
        return json.loads(response.read())


WORK = "set -e; test \"$(cat two.txt)\" = two; echo 'from machine b: {job}' > {job}.txt"
"""The job's script: it must run on the submit's commit (two.txt is only there), and it leaves a file."""


@pytest.mark.slow
async def test_a_remote_runner_fetches_the_commit_pushes_the_branch_and_the_workspace_lands_it(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    machines = two_clones(ws, tmp_path)
    two = commit_in_a(machines, "two.txt", "two\n", push=True)
    assert not has_commit(machines.b, two), "clone B does not have the submit's commit yet"
    jobs = ("far-1", "far-2", "far-3")
    async with up_with_dashboard(ws) as (url, page_url):
        async with runner_on_b(url, ws, machines, "origin"):
            for job in jobs:
                await submit(url, ws, job, WORK.format(job=job), agent="shell")
            records = {job: await ended(url, ws, job) for job in jobs}
        for job, record in records.items():
            assert record["status"] == "succeeded", record
            finish = record["git_at_finish"]
            assert finish["base"] == two, "the job started from the submit's commit, fetched into clone B"
            assert finish["branch"] == f"mam/{job}" and finish["remote"] == str(machines.bare)
            assert "push_error" not in finish
            assert ls_remote(machines.bare, f"mam/{job}") == finish["commit"], "the branch is on the remote"
            assert not has_commit(machines.a, finish["commit"]), "clone A lacks the job's work until it fetches"

        shown_text = (await mam_in_a(ws, "show", "far-1")).stdout.decode()
        assert f"pushed to {machines.bare}; review: mam diff far-1 (fetches it)" in shown_text, shown_text
        assert "git diff" not in shown_text, "a git diff in clone A would fail until the branch is fetched"
        diff = await mam_in_a(ws, "diff", "far-1")
        assert diff.returncode == 0, diff.stderr
        assert "+from machine b: far-1" in diff.stdout.decode()
        merged = await mam_in_a(ws, "merge", "far-1")
        assert merged.returncode == 0, merged.stderr
        said = merged.stdout.decode()
        assert said.startswith("merged job far-1 into main: fast-forward"), said
        assert f"its copy on {machines.bare} stays" in said
        assert git(ws.root, "show", "HEAD:far-1.txt") == "from machine b: far-1"
        assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""

        shown = await anyio.to_thread.run_sync(http_json, f"{page_url.rstrip('/')}/api/jobs/far-2/diff")
        assert "+from machine b: far-2" in shown["diff"], "the dashboard's diff fetched the branch as well"
        dropped = await mam_in_a(ws, "discard", "far-2")
        assert dropped.returncode == 0, dropped.stderr
        assert dropped.stdout.decode().startswith("discarded job far-2: removed its branch mam/far-2")
        assert f"its copy on {machines.bare} stays" in dropped.stdout.decode()
        assert ls_remote(machines.bare, "mam/far-2") == records["far-2"]["git_at_finish"]["commit"]
        again = await mam_in_a(ws, "diff", "far-2")
        assert again.returncode == 1 and b"is gone" in again.stderr, "a discarded branch is not fetched back"

        machines.bare.rename(machines.bare.with_name("moved.git"))  # the remote can no longer be reached
        gone = await mam_in_a(ws, "diff", "far-3")
        assert gone.returncode == 1 and gone.stdout == b""
        line = gone.stderr.decode()
        assert line.count("\n") == 1, line
        assert (
            f"job far-3's branch mam/far-3 is on {machines.bare}, where its runner pushed it, but this clone "
            "cannot fetch it (git fetch: " in line
        ), line


async def test_a_push_that_fails_is_recorded_and_the_outcome_kept_and_a_commit_it_cannot_fetch_fails_the_job(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    machines = two_clones(ws, tmp_path)
    unreachable = f"git://127.0.0.1:{free_port()}/project.git"  # nothing listens there
    async with up_with_flags(ws) as (port, _up):
        url = f"mqtt://127.0.0.1:{port}"
        async with runner_on_b(url, ws, machines, unreachable) as runner:
            await submit(url, ws, "near-1", "echo near > near.txt", agent="shell")
            pushed = await ended(url, ws, "near-1")
            unpushed = commit_in_a(machines, "local.txt", "only in A\n", push=False)
            await submit(url, ws, "near-2", "echo never > never.txt", agent="shell")
            stranded = await ended(url, ws, "near-2")
            log = await runner.wait_for_output("could not push branch mam/near-1", timeout=10)

    assert pushed["status"] == "succeeded", "a failed push leaves the job's outcome as it was"
    finish = pushed["git_at_finish"]
    assert finish["remote"] == unreachable
    assert finish["push_error"].startswith(f"git push {unreachable} mam/near-1: unable to connect to 127.0.0.1"), finish
    assert "Connection refused" in finish["push_error"]
    assert "the job's outcome stands" in log
    assert git(machines.b, "rev-parse", "mam/near-1") == finish["commit"], "the branch stays in clone B"
    shown = (await mam_in_a(ws, "show", "near-1")).stdout.decode()
    assert f"not pushed to {unreachable}: git push" in shown and "stays in the runner's clone" in shown, shown
    merge = await mam_in_a(ws, "merge", "near-1")
    assert merge.returncode == 1
    line = merge.stderr.decode()
    assert line.count("\n") == 1, line
    assert (
        f"job near-1's branch mam/near-1 is only in runner far-runner's clone: its push to {unreachable} failed" in line
    ), line

    assert stranded["status"] == "failed", stranded
    error = stranded["error"]
    assert "\n" not in error
    assert error.startswith(
        f"the commit recorded at submit ({unpushed[:12]}) is not in the runner's clone "
        f"{machines.b} and fetching it failed: git fetch {unreachable} {unpushed[:12]}: "
    ), error
    assert error.endswith(f"push that commit to {unreachable}, then mam retry the job"), error
    assert (
        subprocess.run(
            ["git", "-C", str(machines.b), "rev-parse", "--verify", "--quiet", "mam/near-2"], capture_output=True
        ).returncode
        != 0
    ), "no branch is made for a job that cannot start"


async def test_push_names_a_remote_the_clone_lacks_refused_at_start(ws: WorkspacePaths, tmp_path: Path) -> None:
    machines = two_clones(ws, tmp_path)
    cmd = [
        str(BIN / "mam-agent"),
        "--agent",
        "shell",
        "--push",
        "upstream",
        "--workspace",
        str(machines.b),
        "--projector-key",
        "sha256:" + "0" * 64,
    ]
    result = await run(cmd, cwd=ws.elsewhere)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"mam-agent: error: --push upstream: the clone at {machines.b} has no remote "
        "named upstream (it has: origin); pass a remote's name or a URL\n"
    )
    no_tree = await run([*cmd[:5], "--no-worktree", *cmd[5:]], cwd=ws.elsewhere)
    assert no_tree.returncode == 2
    assert no_tree.stderr.decode() == (
        "mam-agent: error: --push upstream: jobs run without a worktree; add --worktree\n"
    )


async def test_a_later_attempt_on_another_machine_goes_on_from_the_branch_the_first_pushed(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    machines = two_clones(ws, tmp_path)
    clone_c = tmp_path / "machine-c" / "project"
    clone_c.parent.mkdir()
    git(clone_c.parent, "clone", "-q", str(machines.bare), str(clone_c))
    # Attempt 1 leaves first.txt and runs on until runner B stops: handed back failed (--no-requeue), so
    # its branch is pushed, and retried. Attempt 2 finds first.txt only if it goes on from that branch.
    script = "if [ -e first.txt ]; then echo second > second.txt; else echo first > first.txt; echo ready; sleep 60; fi"
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _up):
        url = f"mqtt://127.0.0.1:{port}"
        async with runner_on_b(url, ws, machines, "origin"):
            async with Watch(url, f"mam/{ws_id}/jobs/again-1/events") as events:
                await submit(
                    url, ws, "again-1", script, "--retries", "1", "--backoff", "1", "--no-requeue", agent="shell"
                )
                await events.json(lambda e: e.get("type") == "output" and "ready" in e.get("text", ""), timeout=30)
        retried = await wait_for_state(url, ws_id, "again-1", lambda r: r.get("attempt") == 2, timeout=30)
        first = ls_remote(machines.bare, "mam/again-1")
        assert first, "attempt 1 (handed back failed) pushed its branch"
        assert retried["attempts"][0]["status"] == "failed"
        async with runner_on_b(url, ws, machines, "origin", clone=clone_c, name="runner-c") as runner_c:
            record = await ended(url, ws, "again-1")
            log = runner_c.output()
    assert record["status"] == "succeeded", record
    assert record["runner"] == "runner-c"
    assert "fetched branch mam/again-1 from origin" in log
    tip = record["git_at_finish"]["commit"]
    assert ls_remote(machines.bare, "mam/again-1") == tip
    assert git(clone_c, "rev-parse", f"{tip}~1") == first, "attempt 2 went on from attempt 1's commit"
    assert git(clone_c, "show", f"{tip}:first.txt") == "first"
    assert git(clone_c, "show", f"{tip}:second.txt") == "second"


def test_the_recorded_url_has_no_password_and_no_relative_path(tmp_path: Path) -> None:
    from mam.git.git_remote import resolve_push

    repo = tmp_path / "clone"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "https://bob:s3cret-token@git.example.com:8443/team/project.git")
    git(repo, "remote", "add", "near", "../shared/project.git")
    git(repo, "remote", "add", "forge", "git@example.com:team/project.git")
    assert resolve_push(repo, "origin").url == "https://bob@git.example.com:8443/team/project.git"
    assert resolve_push(repo, "near").url == str(tmp_path / "shared" / "project.git")
    assert resolve_push(repo, "forge").url == "git@example.com:team/project.git"
    assert resolve_push(repo, "../other.git").url == str(tmp_path / "other.git")
    assert resolve_push(repo, "near").given == "near"


@pytest.mark.fast
def test_a_recorded_remote_is_never_an_option_or_a_control_character() -> None:
    from mam.contract.events import EventError, decode_event

    def finished(remote: str) -> bytes:
        return json.dumps(
            {"type": "succeeded", "git": {"commit": "a" * 40, "base": "b" * 40, "branch": "mam/j", "remote": remote}}
        ).encode()

    assert decode_event(finished("/srv/git/project.git")).git.remote == "/srv/git/project.git"  # type: ignore[union-attr]
    for bad in ("--upload-pack=touch /tmp/x", "/srv/a\nb", ""):
        try:
            decode_event(finished(bad))
        except EventError:
            continue
        raise AssertionError(f"{bad!r} was taken as a remote")


DOC = CHECKOUT / "docs" / "remote-runners.md"


def doc_block(name: str) -> str:
    """The shell block after `<!-- two-machines: name -->` in docs/remote-runners.md."""
    match = re.search(rf"<!-- two-machines: {name} -->\n```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match, f"docs/remote-runners.md has no block {name!r}"
    return match.group(1)


def as_on_this_machine(block: str, port: int, bare: Path) -> str:
    """The doc's placeholders for what this machine has: a free port, loopback, the bare repository."""
    for placeholder, here in (
        ("1883", str(port)),
        ("machine-a.example", "127.0.0.1"),
        ("git@example.com:team/project.git", str(bare)),
    ):
        block = block.replace(placeholder, here)
    return block


def exec_last(block: str, command: str) -> str:
    """`block` with its long-running `command` line exec'd, so the daemon's PID is that process's."""
    lines = block.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(command))
    lines[at] = "exec " + lines[at]
    return "set -e\n" + "\n".join(lines) + "\n"


async def test_the_two_machine_setup_in_the_docs_runs_as_written(tmp_path: Path) -> None:
    bare = tmp_path / "shared" / "project.git"
    bare.parent.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    home_a, home_b = tmp_path / "machine-a", tmp_path / "machine-b"
    clone_a = home_a / "src" / "project"
    clone_a.parent.mkdir(parents=True)
    home_b.mkdir()
    git(clone_a.parent, "clone", "-q", str(bare), str(clone_a))
    (clone_a / "a.txt").write_text("one\n")
    git(clone_a, "add", "a.txt")
    git(clone_a, "commit", "-q", "-m", "one")  # not pushed: the doc's first block pushes it
    port = free_port()
    identity = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    path = f"{BIN}:{child_env()['PATH']}"
    on_a = child_env(HOME=str(home_a), PATH=path, MAM_BROKER_URL=None, **identity)
    on_b = child_env(HOME=str(home_b), PATH=path, MAM_BROKER_URL=None, **identity)
    login = f"mqtt://alice:alice-password@127.0.0.1:{port}"

    serve = as_on_this_machine(doc_block("a-serve"), port, bare)
    up = Daemon(["bash", "-c", exec_last(serve, "mam up")], cwd=tmp_path, env=on_a, log=tmp_path / "up.log")
    runner: Daemon | None = None
    try:
        wait_for_port(port, up.proc, timeout=60)  # two argon2 hashes (mam passwd) come first
        ws_id = workspace_id(clone_a)
        await wait_projector_online(login, ws_id, pid=up.pid, timeout=30)
        ids = await run(
            ["bash", "-c", "set -e\n" + as_on_this_machine(doc_block("a-ids"), port, bare)], cwd=clone_a, env=on_a
        )
        assert ids.returncode == 0, ids.stderr
        printed_id, printed_key = ids.stdout.decode().split()
        assert printed_id == ws_id and printed_key.startswith("sha256:")
        start = as_on_this_machine(doc_block("b-runner"), port, bare)
        start = start.replace("project-3f2a9c1e", printed_id).replace("sha256:6c1d...e04b", printed_key)
        async with Watch(login, f"mam/{ws_id}/agents/+/status") as status:
            runner = Daemon(
                ["bash", "-c", exec_last(start, "mam-agent")], cwd=tmp_path, env=on_b, log=tmp_path / "runner.log"
            )
            await status.json(lambda s: s["status"] == "online" and s["pid"] == runner.pid, timeout=30)
        land = as_on_this_machine(doc_block("a-land"), port, bare)
        result = await run(["bash", "-c", "set -euo pipefail\n" + land], cwd=tmp_path, env=on_a, timeout=90)
    finally:
        if runner is not None:
            runner.stop()
        up.stop()
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}\nrunner:\n{runner.output() if runner else ''}"
    assert "+made on machine B" in out, out
    assert re.search(r"^merged job \S+ into main: fast-forward", out, re.M), out
    assert git(clone_a, "show", "HEAD:from-b.txt") == "made on machine B"
    assert (home_b / "src" / "project" / ".git").is_dir(), "the runner ran in machine B's own clone"
    assert "Traceback" not in err + up.output() + (runner.output() if runner else "")
