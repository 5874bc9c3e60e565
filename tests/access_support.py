"""Logins and the documented ACL (docs/mosquitto.acl) as the access tests use them on any broker."""

from __future__ import annotations

import json
from pathlib import Path

from brokers import RunningBroker
from support import BIN, Daemon, Watch, child_env, mam, publish, run, wait_for_state, wait_projector_online
from workspace_support import WorkspacePaths

DOCS = Path(__file__).resolve().parent.parent / "docs"


async def make_user(tmp: Path, user: str, password: str) -> Path:
    path = tmp / "passwd"
    result = await run(mam("passwd", str(path), user), cwd=tmp, input=f"{password}\n".encode())
    assert result.returncode == 0, result.stderr
    assert path.stat().st_mode & 0o777 == 0o600
    return path


async def assert_acl_reserves_projector_topics_and_confines_workspaces(
    acl_mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """docs/mosquitto.acl on a broker with users projector-ws1, agent-ws1, agent-ws2: a forged state and a
    cross-workspace submit are refused (tests/broker/test_access.py on mosquitto, tests/broker/test_broker_acl.py on mam-broker)."""
    port = acl_mosquitto.port
    projector_url = f"mqtt://projector-ws1:pw@127.0.0.1:{port}"
    agent = f"mqtt://agent-ws1:pw@127.0.0.1:{port}"
    foreign = f"mqtt://agent-ws2:pw@127.0.0.1:{port}"
    daemon = Daemon(
        [str(BIN / "mam-projector"), "--broker", projector_url, "--workspace", str(ws.root), "--workspace-id", "ws1"],
        cwd=ws.elsewhere,
        env=child_env(),
        log=ws.root.parent / "p.log",
    )
    try:
        await wait_projector_online(agent, "ws1", pid=daemon.pid)
        await publish(agent, "mam/ws1/jobs/job-1/events", b'{"type":"submitted","prompt":"p","agent":"a"}')
        good = await wait_for_state(agent, "ws1", "job-1")
        await publish(
            agent, "mam/ws1/jobs/job-1/state", json.dumps({**good, "status": "succeeded"}).encode(), retain=True
        )
        await publish(foreign, "mam/ws1/jobs/intruder/events", b'{"type":"submitted","prompt":"p","agent":"a"}')
        await publish(agent, "mam/ws1/jobs/job-2/events", b'{"type":"submitted","prompt":"p","agent":"a"}')
        await wait_for_state(agent, "ws1", "job-2")
        async with Watch(agent, "mam/ws1/jobs/job-1/state") as state:
            assert (await state.json())["status"] == "submitted", "a forged state publish must be refused"
        assert not (ws.jobs / "intruder.json").exists(), "a cross-workspace submit must be refused"
        assert json.loads((ws.jobs / "job-1.json").read_bytes())["status"] == "submitted"
    finally:
        daemon.stop()
