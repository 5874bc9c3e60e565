"""Access: the embedded broker with a password file; mosquitto ACLs from docs/."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from access_support import DOCS, assert_acl_reserves_projector_topics_and_confines_workspaces, make_user

from brokers import RunningBroker, free_port, require_binary, stop, wait_for_port
from e2e import workspace_id
from support import Daemon, child_env, mam, run, wait_projector_online
from workspace_support import WorkspacePaths


@pytest.mark.slow
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
    await assert_acl_reserves_projector_topics_and_confines_workspaces(acl_mosquitto, ws)
