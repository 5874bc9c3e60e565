"""Access: the embedded broker with a password file; mosquitto ACLs from docs/."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from brokers import RunningBroker, free_port, require_binary, stop, wait_for_port
from conftest import WorkspacePaths
from e2e import workspace_id
from support import BIN, Daemon, Watch, child_env, mam, publish, run, wait_for_state, wait_projector_online

DOCS = Path(__file__).resolve().parent.parent / "docs"


async def make_user(tmp: Path, user: str, password: str) -> Path:
    path = tmp / "passwd"
    result = await run(mam("passwd", str(path), user), cwd=tmp, input=f"{password}\n".encode())
    assert result.returncode == 0, result.stderr
    assert path.stat().st_mode & 0o777 == 0o600
    return path


async def test_password_file_admits_the_user_and_refuses_a_wrong_password(ws: WorkspacePaths, tmp_path: Path) -> None:
    passwd = await make_user(tmp_path, "agent", "s3cret")
    port = free_port()
    url = f"mqtt://agent:s3cret@127.0.0.1:{port}"
    up = Daemon(
        mam("up", "--port", str(port), "--workspace", str(ws.root), "--password-file", str(passwd)),
        cwd=ws.elsewhere,
        env=child_env(MAM_BROKER_URL=url),
        log=tmp_path / "up.log",
    )
    try:
        wait_for_port(port, up.proc)
        await wait_projector_online(url, workspace_id(ws.root))
        ok = await run(
            mam("submit", "--prompt", "p", "--agent", "a", "--wait", "--workspace", str(ws.root), "--broker", url),
            cwd=ws.elsewhere,
        )
        assert ok.returncode == 0, ok.stderr
        for bad in (
            f"mqtt://agent:wrong@127.0.0.1:{port}",
            f"mqtt://127.0.0.1:{port}",
            f"mqtt://nobody:x@127.0.0.1:{port}",
        ):
            refused = await run(
                mam("submit", "--prompt", "p", "--agent", "a", "--workspace", str(ws.root), "--broker", bad),
                cwd=ws.elsewhere,
            )
            assert refused.returncode == 3, (bad, refused.stderr)
            assert b"refused the credentials" in refused.stderr or b"Not authorized" in refused.stderr, refused.stderr
    finally:
        up.stop()
    assert up.proc.returncode == 0, up.output()


async def test_mam_up_with_password_file_needs_the_projector_login(ws: WorkspacePaths, tmp_path: Path) -> None:
    passwd = await make_user(tmp_path, "agent", "pw")
    result = await run(
        mam("up", "--port", "0", "--workspace", str(ws.root), "--password-file", str(passwd)),
        cwd=ws.elsewhere,
        timeout=20,
    )
    assert result.returncode == 2 and b"MAM_BROKER_URL" in result.stderr


@pytest.fixture
def acl_mosquitto(tmp_path: Path) -> RunningBroker:  # type: ignore[misc]
    binary = require_binary("mosquitto")
    port = free_port()
    passwd = tmp_path / "mosquitto.passwd"
    for user in ("projector-ws1", "agent-ws1", "agent-ws2"):
        subprocess.run(
            [shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd", "-b"]
            + (["-c"] if not passwd.exists() else [])
            + [str(passwd), user, "pw"],
            check=True,
        )
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nuser root\nallow_anonymous false\n"
        f"password_file {passwd}\nacl_file {DOCS / 'mosquitto.acl'}\npersistence false\n"
    )
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc)
    yield RunningBroker("mosquitto", port, proc)
    stop(proc)


async def test_mosquitto_acl_reserves_projector_topics_and_confines_workspaces(
    acl_mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
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
