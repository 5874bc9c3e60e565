"""A full disk: the projector stops acknowledging, says why, and resumes without loss."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import RunningBroker
from conftest import WorkspacePaths
from e2e import projector_process, workspace_id
from support import Watch, publish, wait_for_state


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.decode().strip()}); needs root or CAP_SYS_ADMIN")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


async def test_full_disk_stops_acknowledging_and_resumes_without_loss(
    amqtt: RunningBroker, small_disk: Path, tmp_path: Path
) -> None:
    root = small_disk / "workspace"
    root.mkdir()
    ws = WorkspacePaths(root=root, elsewhere=tmp_path / "elsewhere")
    ws.elsewhere.mkdir()
    ws_id = workspace_id(root)
    topic = f"mam/{ws_id}/jobs/job-1/events"
    async with projector_process(amqtt, root, ws.elsewhere, log_dir=tmp_path) as projector:
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"a","id":"e1"}')
        await wait_for_state(amqtt.url, ws_id, "job-1")
        filler = small_disk / "filler"
        fill(filler)
        async with Watch(amqtt.url, f"mam/{ws_id}/projector/status") as status:
            await publish(amqtt.url, topic, b'{"type":"claimed","runner":"r","id":"e2"}')
            await publish(amqtt.url, topic, b'{"type":"started","id":"e3"}')
            degraded = await status.json(lambda s: s["status"] == "degraded")
            assert "No space left on device" in degraded["detail"] and "not acknowledging" in degraded["detail"]
            assert projector.proc.poll() is None
            assert json.loads((ws.jobs / "job-1.json").read_bytes())["version"] == 1
            os.unlink(filler)
            await status.json(lambda s: s["status"] == "online")
        record = await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["version"] == 3)
        assert record["status"] == "running"
    ids = [json.loads(line)["event"]["id"] for line in (ws.logs / "job-1" / "events.jsonl").read_text().splitlines()]
    assert ids == ["e1", "e2", "e3"]
    assert "No space left on device" in projector.output()
