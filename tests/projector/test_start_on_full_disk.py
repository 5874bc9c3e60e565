"""A projector started on a disk that refuses writes: `degraded`, one line a try, a retry, nothing left behind.

Issue 42: `mam up` or `mam-projector` started on a full disk (or a read-only registry) exited with a 45-line
ExceptionGroup traceback and left a `.runtime.json.<pid>.tmp` behind per try. Now the start is what serving
is on such a disk: the retained status says `degraded` with the reason, each try is one line, and once the disk
takes writes again the projector starts and records what waited.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from disk_full_support import fill, remount, tmpfs

from brokers import RunningBroker, free_port, wait_for_port
from e2e import projector_process, up_process, workspace_id
from support import BIN, Daemon, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths, allow_unsigned_runners

SUBMITTED = b'{"type":"submitted","prompt":"p","agent":"a","id":"e1"}'


def _left_behind(top: Path) -> list[Path]:
    """Temp files a write left: `.<name>.<pid>.tmp` (the runtime file's, the public key's) or `*.tmp`."""
    return sorted(path for path in top.rglob("*") if path.name.endswith(".tmp"))


def _tries(output: str) -> list[str]:
    return [line for line in output.splitlines() if "at start: cannot write" in line]


async def test_mam_projector_started_on_a_full_disk_is_degraded_retries_in_one_line_and_leaves_no_temp_file(
    mosquitto: RunningBroker, small_disk: Path, tmp_path: Path
) -> None:
    """The registry dir (`.mam/jobs`) is a roomy tmpfs of its own, `.mam` beside it the full one: the lock is
    taken and described, and the runtime file (`.mam/runtime.json`) is what the disk refuses."""
    ws = WorkspacePaths(root=small_disk / "workspace", elsewhere=tmp_path / "elsewhere")
    ws.elsewhere.mkdir()
    with tmpfs(ws.jobs, "4m"):
        allow_unsigned_runners(ws.root)
        ws_id = workspace_id(ws.root)
        topic = f"mam/{ws_id}/jobs/job-1/events"
        async with projector_process(mosquitto, ws.root, ws.elsewhere, log_dir=tmp_path):
            pass  # its persistent session: what is published while it is away waits for it
        fill(small_disk / "filler")
        projector = Daemon(
            [str(BIN / "mam-projector"), "--broker", mosquitto.url, "--workspace", str(ws.root)],
            cwd=ws.elsewhere,
            env=child_env(),
            log=tmp_path / "full.log",
        )
        try:
            async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
                degraded = await status.json(lambda s: s["status"] == "degraded" and s["pid"] == projector.pid)
                assert degraded["detail"] == (
                    f"cannot write {ws.root / '.mam' / 'runtime.json'}: No space left on "
                    "device; not acknowledging events until it can"
                ), degraded
                await publish(mosquitto.url, topic, SUBMITTED)  # waits in the broker meanwhile
                output = await projector.wait_for_output("(retrying in 1.0s)", timeout=20)  # the second try
                assert _left_behind(ws.root) == [], "no temp file per try"
                assert not (ws.jobs / "job-1.json").exists()
                os.unlink(small_disk / "filler")
                online = await status.json(lambda s: s["status"] == "online" and s["pid"] == projector.pid)
                assert online["detail"] is None
            record = await wait_for_state(mosquitto.url, ws_id, "job-1")
            assert record["status"] == "submitted"
        finally:
            projector.stop()
    output = projector.output()
    tries = _tries(output)
    assert len(tries) >= 2 and "retrying in 0.5s" in tries[0] and "retrying in 1.0s" in tries[1], output
    assert "Traceback" not in output and "ExceptionGroup" not in output, output
    assert "at start: storage is writable again; resuming" in output


async def test_mam_up_started_on_a_read_only_registry_is_degraded_then_serves_once_it_is_writable(
    small_disk: Path, tmp_path: Path
) -> None:
    """As root, `chmod` stops no write: the workspace's tmpfs is remounted read-only (`EROFS` for everyone)."""
    ws = WorkspacePaths(root=small_disk / "workspace", elsewhere=tmp_path / "elsewhere")
    ws.root.mkdir()
    ws.elsewhere.mkdir()
    allow_unsigned_runners(ws.root)
    ws_id = workspace_id(ws.root)
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port, log_dir=tmp_path):
        await publish(url, f"mam/{ws_id}/jobs/job-0/events", SUBMITTED)
        await wait_for_state(url, ws_id, "job-0")
    before = sorted(p.relative_to(ws.root) for p in ws.root.rglob("*"))
    remount(small_disk, read_only=True)
    up = Daemon(
        mam("up", "--port", str(port), "--workspace", str(ws.root)),
        cwd=ws.elsewhere,
        env=child_env(),
        log=tmp_path / "read-only.log",
    )
    try:
        wait_for_port(port, up.proc)  # the broker serves while the projector waits for the disk
        async with Watch(url, f"mam/{ws_id}/projector/status") as status:
            degraded = await status.json(lambda s: s["status"] == "degraded" and s["pid"] == up.pid)
            assert degraded["detail"] == (
                f"cannot write {ws.jobs / '.projector.lock'}: Read-only file system; "
                "not acknowledging events until it can"
            ), degraded
            await up.wait_for_output("(retrying in 1.0s)", timeout=20)
            assert sorted(p.relative_to(ws.root) for p in ws.root.rglob("*")) == before, "nothing written or left"
            remount(small_disk, read_only=False)
            await status.json(lambda s: s["status"] == "online" and s["pid"] == up.pid)
        done = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "a",
                "--job-id",
                "job-1",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert json.loads((ws.jobs / "job-1.json").read_bytes())["status"] == "submitted"
    finally:
        remount(small_disk, read_only=False)
        up.stop()
    output = up.output()
    assert len(_tries(output)) >= 2, output
    assert "Traceback" not in output and "ExceptionGroup" not in output, output
