"""The workspace is found like git finds a repository, and its broker through the runtime file."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from mam.contract.errors import UsageError
from mam.contract.workspace import RULE_CWD, RULE_GIT, RULE_MAM_DIR, find_root, resolve

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, Daemon, child_env, mam, run, wait_for_json_file
from workspace_support import WorkspacePaths


def _git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def test_nearest_mam_dir_wins_over_the_git_top(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg" / "src" / "deep").mkdir(parents=True)
    _git_init(repo)
    assert find_root(repo / "pkg" / "src" / "deep") == (repo, RULE_GIT)
    (repo / "pkg" / ".mam").mkdir()
    assert find_root(repo / "pkg" / "src" / "deep") == (repo / "pkg", RULE_MAM_DIR)
    assert find_root(repo) == (repo, RULE_GIT), "a .mam/ below the cwd does not count"


@pytest.mark.fast
def test_a_git_worktree_file_marks_the_top_too(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    assert find_root(tree / "sub") == (tree, RULE_GIT)


@pytest.mark.fast
def test_without_mam_dir_or_git_the_cwd_is_the_root(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert find_root(plain) == (plain, RULE_CWD)


@pytest.mark.fast
def test_resolve_from_a_subdirectory_finds_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    (root / ".mam").mkdir(parents=True)
    (root / "src" / "sub").mkdir(parents=True)
    monkeypatch.chdir(root / "src" / "sub")
    found = resolve(env={})
    assert (found.root, found.rule) == (root, RULE_MAM_DIR)
    assert found.registry_dir == root / ".mam" / "jobs" and found.logs_dir == root / ".mam" / "delegate_job_logs"
    assert found.id == resolve(workspace=root, env={}).id
    # The environment still wins, in the library's order.
    assert resolve(env={"MAM_JOBS_DIR": str(tmp_path / "j")}).registry_dir == tmp_path / "j"


@pytest.mark.fast
def test_workspace_root_naming_no_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(UsageError, match=f"WORKSPACE_ROOT='{missing}' is not a directory"):
        resolve(env={"WORKSPACE_ROOT": str(missing)})


async def test_missing_workspace_root_is_a_one_line_usage_error(ws: WorkspacePaths) -> None:
    missing = ws.root / "nope"
    result = await run(mam("jobs"), cwd=ws.elsewhere, env=child_env(WORKSPACE_ROOT=str(missing)))
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"mam: error: WORKSPACE_ROOT='{missing}' is not a directory: create it, fix or unset WORKSPACE_ROOT, "
        "or pass --workspace DIR\n"
    )


async def test_commands_run_from_a_subdirectory_land_in_the_workspace(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    sub = ws.root / "src" / "sub"
    sub.mkdir(parents=True)
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        assert (ws.root / ".mam").is_dir()
        result = await run(
            mam("submit", "--prompt", "p", "--agent", "a", "--job-id", "from-sub", "--broker", amqtt.url), cwd=sub
        )
        assert result.returncode == 0, result.stderr
        shown = await run(mam("show", "from-sub", "--json"), cwd=sub)
        assert json.loads(shown.stdout)["workspace"] == workspace_id(ws.root)
        described = json.loads((await run(mam("workspace", "--json"), cwd=sub)).stdout)
    assert (ws.jobs / "from-sub.json").is_file()
    assert described["root"] == str(ws.root) and described["root_rule"] == RULE_MAM_DIR
    assert not (sub / ".mam").exists() and not (ws.root / "src" / ".mam").exists()


@asynccontextmanager
async def mam_up_from(cwd: Path, log: Path) -> AsyncIterator[Daemon]:
    """`mam up --port 0` started in `cwd`, with no --workspace: the root is found."""
    env = child_env(MAM_BROKER_URL=None)
    daemon = Daemon([str(BIN / "mam"), "up", "--port", "0"], cwd=cwd, env=env, log=log)
    try:
        yield daemon
    finally:
        daemon.stop()


async def test_a_client_without_broker_settings_reaches_mam_up_of_its_workspace(ws: WorkspacePaths) -> None:
    """`mam up --port 0` from a subdirectory of a git work tree serves the tree's top, and clients
    with neither --broker nor MAM_BROKER_URL find it through `.mam/runtime.json`."""
    _git_init(ws.root)
    sub = ws.root / "src" / "sub"
    sub.mkdir(parents=True)
    runtime_file = ws.root / ".mam" / "runtime.json"
    no_broker = child_env(MAM_BROKER_URL=None)
    async with mam_up_from(sub, ws.root.parent / "up.log") as up:
        runtime = await wait_for_json_file(runtime_file)
        assert runtime["pid"] == up.pid and runtime["served_by"] == "mam up"
        assert runtime["broker"].startswith("mqtt://127.0.0.1:") and not runtime["broker"].endswith(":1883")
        assert not (sub / ".mam").exists(), "mam up in a subdirectory must not create a nested .mam/"

        result = await run(mam("submit", "--prompt", "p", "--agent", "a", "--job-id", "found"), cwd=sub, env=no_broker)
        assert result.returncode == 0, result.stderr
        described = json.loads((await run(mam("workspace", "--json"), cwd=sub, env=no_broker)).stdout)
        assert described["broker"] == runtime["broker"] and described["broker_from"].startswith(str(runtime_file))

        wrong = await run(mam("workspace"), cwd=sub, env=child_env(MAM_BROKER_URL="mqtt://127.0.0.1:9"))
        assert wrong.returncode == 0
        assert f"but mam up (pid {up.pid}) serves this workspace on {runtime['broker']}" in wrong.stderr.decode()
    assert (ws.jobs / "found.json").is_file()
    assert not runtime_file.exists(), "a clean stop removes the runtime file"


async def test_a_stale_runtime_file_is_ignored(ws: WorkspacePaths) -> None:
    """A runtime file naming a dead process sends no client anywhere but the default."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "runtime.json").write_text(
        json.dumps(
            {
                "broker": "mqtt://127.0.0.1:9",
                "pid": gone.pid,
                "host": socket.gethostname(),
                "workspace": "w",
                "started_at": "2026-01-01T00:00:00.000Z",
                "served_by": "mam up",
            }
        )
    )
    described = json.loads(
        (await run(mam("workspace", "--json"), cwd=ws.root, env=child_env(MAM_BROKER_URL=None))).stdout
    )
    assert described["broker"] == "mqtt://127.0.0.1:1883" and described["broker_from"] == "the default"


@pytest.mark.fast
def test_the_runtime_files_are_never_written_through_a_planted_link(ws: WorkspacePaths) -> None:
    from mam.registry.runtime import Runtime, remember_port, write_runtime

    workspace = resolve(workspace=ws.root, env={})
    (ws.root / ".mam").mkdir()
    outside = ws.elsewhere.parent / "outside.txt"
    outside.write_text("keep me")
    import os

    for name in ("runtime.json", f".runtime.json.{os.getpid()}.tmp", "up.json", f".up.json.{os.getpid()}.tmp"):
        (ws.root / ".mam" / name).symlink_to(outside)
    write_runtime(
        workspace,
        Runtime(
            broker="mqtt://127.0.0.1:1", pid=os.getpid(), host="h", workspace="w", started_at="t", served_by="mam up"
        ),
    )
    remember_port(workspace, 4242)
    assert outside.read_text() == "keep me"
    assert not (ws.root / ".mam" / "runtime.json").is_symlink()
    assert json.loads((ws.root / ".mam" / "up.json").read_text()) == {"port": 4242}
