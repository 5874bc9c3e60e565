"""The dashboard's runner panel shows a runner that was asked to stop as `draining` (Chromium, Playwright)."""

from __future__ import annotations

import signal

from dashboard_support import browser_page, publisher, up_with_dashboard
from runner_support import agent_runner, mock_command

from workspace_support import WorkspacePaths

WAIT = 15_000


async def test_the_runner_panel_shows_a_draining_runner(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await page.goto(page_url)
        runner_row = page.locator('#agents tr[data-agent-id="r-drain"] .status')
        async with agent_runner(url, ws, *mock_command(), "--drain-timeout", "60", name="r-drain") as runner:
            await expect(runner_row).to_have_text("online", timeout=WAIT)
            await pub.submit(prompt="hang", agent="mock", job_id="web-drain", wait=True)
            await expect(page.locator('#jobs tr[data-job-id="web-drain"] .status')).to_have_text(
                "running", timeout=WAIT
            )
            runner.proc.send_signal(signal.SIGTERM)
            await expect(runner_row).to_have_text("draining", timeout=WAIT)
            runner.proc.send_signal(signal.SIGTERM)  # the second signal releases the job at once
            await expect(page.locator('#jobs tr[data-job-id="web-drain"] .status')).to_have_text(
                "submitted", timeout=WAIT
            )
            await expect(runner_row).to_have_text("offline", timeout=WAIT)
