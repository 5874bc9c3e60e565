"""What mam writes under `.mam/` is the user's alone (0600 files, 0700 dirs) unless `.mam/config.json` says otherwise.

Real `mam up` processes under a 022 umask, a real shell runner doing a job.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_support import agent_runner, submit

from e2e import up_with_flags, workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The usual umask, under which a file made with mode 0644 is readable by everyone."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(top: Path) -> dict[str, tuple[str, int]]:
    """Every file and dir under `top` (links not followed) and its permission bits."""
    found = {".": ("dir", stat.S_IMODE(top.lstat().st_mode))}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
            found[str(path.relative_to(top))] = (kind, stat.S_IMODE(st.st_mode))
    return found


def loose(found: dict[str, tuple[str, int]], file: int, directory: int) -> dict[str, str]:
    want = {"file": file, "dir": directory}
    return {name: f"{kind} {mode:04o}" for name, (kind, mode) in found.items() if kind in want and mode != want[kind]}


async def run_a_job(ws: WorkspacePaths, job_id: str, *flags: str) -> str:
    """`mam up` (with `flags`) and a shell runner do one job printing a secret; `mam up`'s output."""
    async with up_with_flags(ws, *flags) as (port, up):
        url = f"mqtt://127.0.0.1:{port}"
        async with agent_runner(url, ws, "--command", "sh -s", agent="sh"):
            await submit(url, ws, job_id, "echo the-secret", agent="sh")
            record = await wait_for_state(
                url, workspace_id(ws.root), job_id, lambda r: r["status"] == "succeeded", timeout=30
            )
        assert "the-secret" in record["result"]
    return up.output()


async def test_a_new_workspace_is_private_after_a_job(ws: WorkspacePaths) -> None:
    await run_a_job(ws, "job-1")
    found = modes(ws.root / ".mam")
    assert {
        "jobs/job-1.json",
        "delegate_job_logs/job-1/events.jsonl",
        "jobs/.index.sqlite",
        "projector.key",
        "up.json",
    } <= set(found)
    assert loose(found, 0o600, 0o700) == {}, "every file 0600 and every dir 0700 under .mam/"


async def test_an_existing_world_readable_workspace_is_tightened_at_start_without_following_links(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    await run_a_job(ws, "job-1")
    outside = tmp_path / "outside.txt"
    outside.write_text("not mam's\n")
    outside.chmod(0o644)
    mam_dir = ws.root / ".mam"
    (mam_dir / "link-out").symlink_to(outside)
    for name, (kind, _mode) in modes(mam_dir).items():  # as an older mam left it (its key was always 0600)
        if kind != "link" and not name == "projector.key":
            (mam_dir / name).chmod(0o755 if kind == "dir" else 0o644)
    assert loose(modes(mam_dir), 0o600, 0o700)

    output = await run_a_job(ws, "job-2")
    assert output.count("tightened") == 1, output
    assert loose(modes(mam_dir), 0o600, 0o700) == {}
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644, "a link under .mam/ is not followed"


async def test_config_sets_shared_modes_and_a_bad_one_stops_mam_up_in_one_line(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    config = ws.root / ".mam" / "config.json"
    config.write_text(json.dumps({"file_mode": "0755"}))
    refused = await run(mam("up", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert refused.returncode != 0 and refused.stderr.count(b"\n") == 1, refused.stderr
    assert f"{config}: file_mode '0755': files need".encode() in refused.stderr, refused.stderr
    assert not (ws.root / ".mam" / "jobs").exists()

    config.write_text(json.dumps({"file_mode": "0640", "dir_mode": "0750"}))
    (ws.root / ".mam").chmod(0o750)
    await run_a_job(ws, "job-1")
    found = modes(ws.root / ".mam")
    found.pop("projector.key")  # a private key stays 0600 whatever the config says
    assert loose(found, 0o640, 0o750) == {}
