"""`mam dashboard` as a command: it serves the page off a broker, and refuses to be exposed without a login."""

from __future__ import annotations

from pathlib import Path

from dashboard_server_support import Stream, request

from brokers import RunningBroker, free_port, wait_for_port
from e2e import projector_process
from support import Daemon, child_env, mam, run
from workspace_support import WorkspacePaths


async def test_mam_dashboard_serves_the_workspace_live_off_a_broker(
    mosquitto: RunningBroker, ws: WorkspacePaths, guard: Path
) -> None:
    port = free_port()
    async with projector_process(mosquitto, ws.root, guard):
        daemon = Daemon(
            mam("dashboard", "--port", str(port), "--broker", mosquitto.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            log=ws.root.parent / "dashboard.log",
        )
        try:
            wait_for_port(port, daemon.proc)
            page = f"http://127.0.0.1:{port}/"
            status, _, body = await request(page, "GET", "/")
            assert status == 200 and b'src="/static/app.js"' in body
            assert (await request(page, "GET", "/static/view.js"))[0] == 200
            async with Stream(page) as stream:
                projector = (await stream.next("snapshot"))["projector"] or await stream.next("projector")
                assert projector["status"] == "online"
            assert f"mam dashboard: {page}" in daemon.output()
        finally:
            daemon.stop()


async def test_mam_dashboard_off_loopback_without_a_password_file_exits_2_with_one_line(ws: WorkspacePaths) -> None:
    result = await run(
        mam("dashboard", "--host", "0.0.0.0", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere
    )
    assert result.returncode == 2
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "--password-file" in lines[0], lines
