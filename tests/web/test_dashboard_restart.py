"""The dashboard's live view rides out a broker restart: a page showing a job's output shows every line once."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import browser_page
from fleet_support import shell_runner
from restart_support import TICKS, ticking
from runner_support import submit

from brokers import BROKERS, free_port, wait_for_port
from e2e import projector_process, workspace_id
from support import Daemon, child_env, mam, wait_for_state
from workspace_support import WorkspacePaths


@pytest.mark.slow
async def test_an_open_job_page_shows_every_line_once_across_a_broker_restart(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    port = free_port()
    with BROKERS["mosquitto"](tmp_path / "own-mosquitto") as broker:
        async with projector_process(broker, ws.root, ws.elsewhere), shell_runner(broker.url, ws, "r1"):
            dashboard = Daemon(
                mam("dashboard", "--port", str(port), "--broker", broker.url, "--workspace", str(ws.root)),
                cwd=ws.elsewhere,
                env=child_env(),
                log=tmp_path / "dashboard.log",
            )
            try:
                wait_for_port(port, dashboard.proc)
                async with browser_page() as page:
                    fence = tmp_path / "restarting"
                    await submit(broker.url, ws, "job-tick", ticking(fence), agent="shell")
                    await page.goto(f"http://127.0.0.1:{port}/?job=job-tick")
                    output = page.locator("#output")
                    await expect(output).to_contain_text("tick 3", timeout=30_000)
                    broker.restart()
                    await dashboard.wait_for_output("retrying", timeout=30)  # the dashboard saw the loss
                    fence.touch()  # the job's other lines come after the restart
                    await wait_for_state(
                        broker.url, ws_id, "job-tick", lambda r: r["status"] == "succeeded", timeout=60
                    )
                    await expect(output).to_contain_text(f"tick {TICKS}\n", timeout=30_000)
                    await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=30_000)
                    shown = await output.text_content() or ""
            finally:
                dashboard.stop()
    ticks = [line for line in shown.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, TICKS + 1)], shown
