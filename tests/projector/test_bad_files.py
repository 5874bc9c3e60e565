"""One bad file neither stops nor blinds the projector.

A garbage query index is derived state: `mam up` rebuilds it at start (one
log line) and readers fall back to the records. A link planted at
`.mam/jobs/.tombstones` (read for every new job) refuses tombstone work only,
said once: every job's events are recorded, none refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from brokers import RunningBroker, free_port
from e2e import projector_process, submit, up_process, workspace_id
from support import mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

GARBAGE = bytes(range(256)) * 16


async def test_a_garbage_index_is_rebuilt_at_start_and_readers_fall_back_to_the_records(
    ws: WorkspacePaths,
) -> None:
    ws.jobs.mkdir(parents=True)
    (ws.jobs / ".index.sqlite").write_bytes(GARBAGE)
    ws_id = workspace_id(ws.root)
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port) as up:
        url = f"mqtt://127.0.0.1:{port}"
        await publish(url, f"mam/{ws_id}/jobs/after-garbage/events", submit("after-garbage", "g1"))
        await wait_for_state(url, ws_id, "after-garbage")
    rebuilt = [line for line in up.output().splitlines() if "query index: rebuilt" in line]
    assert len(rebuilt) == 1 and "unreadable" in rebuilt[0], up.output()
    assert "Traceback" not in up.output()
    index = ws.jobs / ".index.sqlite"
    with open(index, "r+b") as damaged:  # a page of the jobs table (its meta still reads: "current")
        damaged.seek(2 * 4096)
        damaged.write(b"\xff" * 4096)
    for how in ("damaged", "garbage"):  # a reader given one, no projector running
        for argv in (("jobs",), ("jobs", "--json"), ("show", "garbage")):
            listed = await run(mam(*argv, "--workspace", str(ws.root)), cwd=ws.elsewhere)
            assert listed.returncode == 0 and b"after-garbage" in listed.stdout, (how, argv, listed)
            assert b"Traceback" not in listed.stderr
        index.write_bytes(GARBAGE)


async def test_a_link_at_the_tombstones_dir_is_said_once_and_every_job_is_recorded(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws.jobs.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = ws.jobs / ".tombstones"
    link.symlink_to(outside, target_is_directory=True)
    ws_id = workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        for n in range(3):
            await publish(mosquitto.url, f"mam/{ws_id}/jobs/new-{n}/events", submit(f"new-{n}", f"h{n}"))
        for n in range(3):
            await wait_for_state(mosquitto.url, ws_id, f"new-{n}")
        assert projector.proc.poll() is None
    shown = os.path.join(os.path.realpath(ws.jobs), ".tombstones")
    said = [line for line in projector.output().splitlines() if f"symlink at {shown}" in line]
    assert len(said) == 1 and "tombstones are not read" in said[0], projector.output()
    assert "Traceback" not in projector.output()
    assert not (ws.logs / "_rejected.jsonl").exists(), "nothing was refused"
    assert list(outside.iterdir()) == [] and link.is_symlink()
    verify = await run(mam("rebuild", "--verify", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 1 and b"Traceback" not in verify.stderr, verify
    assert json.loads(verify.stdout)["links"] == [".tombstones"]
    rebuilt = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert rebuilt.returncode == 0, rebuilt
    assert not link.is_symlink() and list(outside.iterdir()) == [], "replaced, what it pointed at untouched"
