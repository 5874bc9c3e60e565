"""`mam rebuild`: the registry is a projection of the audit log, byte for byte."""

from __future__ import annotations

import json

import pytest

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


async def populate(broker: RunningBroker, ws: WorkspacePaths) -> dict[str, bytes]:
    ws_id = workspace_id(ws.root)
    async with projector_process(broker, ws.root, ws.elsewhere):
        for n in range(5):
            topic = f"mam/{ws_id}/jobs/job-{n}/events"
            await publish(
                broker.url, topic, json.dumps({"type": "submitted", "prompt": f"p{n}", "agent": "a"}).encode()
            )
            await publish(broker.url, topic, b'{"type":"claimed","runner":"r"}')
            await publish(broker.url, topic, b'{"type":"started"}')
            await publish(broker.url, topic, b'{"type":"output","text":"hello\\n"}')
            if n % 2:
                await publish(broker.url, topic, b'{"type":"succeeded","result":"ok"}')
        for n in range(5):
            await wait_for_state(broker.url, ws_id, f"job-{n}", lambda r, n=n: r["version"] == (5 if n % 2 else 4))
    return {p.name: p.read_bytes() for p in ws.jobs.glob("*.json")}


async def test_rebuild_restores_deleted_and_corrupted_records_byte_for_byte(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    good = await populate(amqtt, ws)
    env = child_env(WORKSPACE_ROOT=str(ws.root))
    clean = await run(mam("rebuild", "--verify"), cwd=ws.elsewhere, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert b"checked 5 jobs from 22 events" in clean.stdout

    (ws.jobs / "job-0.json").unlink()
    (ws.jobs / "job-1.json").write_bytes(b'{"garbage": tru')
    (ws.jobs / "job-2.json").write_bytes(good["job-2.json"].replace(b'"running"', b'"succeeded"'))
    (ws.jobs / "stray.json").write_bytes(b"{}")
    damaged = {p.name: p.read_bytes() for p in ws.jobs.glob("*.json")}

    verify = await run(mam("rebuild", "--verify", "--json"), cwd=ws.elsewhere, env=env)
    assert verify.returncode == 1
    report = json.loads(verify.stdout)
    assert report["missing"] == ["job-0"] and report["differing"] == ["job-1", "job-2"]
    assert report["orphans"] == ["stray"]
    assert {p.name: p.read_bytes() for p in ws.jobs.glob("*.json")} == damaged, "--verify changes nothing"

    fixed = await run(mam("rebuild"), cwd=ws.elsewhere, env=env)
    assert fixed.returncode == 0, fixed.stderr
    assert {p.name: p.read_bytes() for p in ws.jobs.glob("*.json")} == good
    again = await run(mam("rebuild", "--verify"), cwd=ws.elsewhere, env=env)
    assert again.returncode == 0


async def test_rebuild_refuses_while_a_projector_serves_the_workspace(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        result = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert result.returncode == 1
        assert f"pid {projector.pid}".encode() in result.stderr and b"Traceback" not in result.stderr


async def test_rebuild_shows_progress_on_a_terminal(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    import os
    import pty
    import subprocess

    await populate(amqtt, ws)
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            mam("rebuild", "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            stderr=secondary,
            stdout=subprocess.PIPE,
            timeout=30,
        )
        assert proc.returncode == 0
        os.close(secondary)
        secondary = -1
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert b"rebuild [" in shown and b"5/5 jobs" in shown
