"""A job whose agent was refused tool calls at its permission level does not read as a plain success: in the
dashboard (Debian's headless Chromium, Playwright) and in `mam jobs`.

The fake `claude` (tests/fake_agents) under `--permission-mode plan` reports a Write it was refused in its
result's `permission_denials`, as Claude Code does; the job succeeds and records the denial.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard
from test_metrics import fake_env
from test_runner_support import agent_runner

from conftest import WorkspacePaths
from e2e import workspace_id
from support import mam, run, wait_for_state

WAIT = 15_000


async def test_denied_edits_show_in_the_list_the_detail_the_api_and_mam_jobs(ws: WorkspacePaths, tmp_path: Path) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await page.goto(page_url)
        async with agent_runner(url, ws, "--permissions", "read-only", agent="claude-code", env=fake_env(),
                                name="r-plan"):
            await pub.submit(prompt="please edit the notes", agent="claude-code", job_id="denied-1", wait=True)
            await pub.submit(prompt="say hi", agent="claude-code", job_id="plain-1", wait=True)
            for job_id in ("denied-1", "plain-1"):
                await wait_for_state(url, ws_id, job_id, lambda r: r["status"] in ("succeeded", "failed"))

        denied = page.locator('#jobs tbody tr[data-job-id="denied-1"] .status')
        await expect(denied).to_have_text("succeeded, 1 denied", timeout=WAIT)
        assert await denied.get_attribute("data-denials") == "1"
        assert await denied.get_attribute("title") == "Write notes.md"
        plain = page.locator('#jobs tbody tr[data-job-id="plain-1"] .status')
        await expect(plain).to_have_text("succeeded")
        assert await plain.get_attribute("data-denials") is None

        await page.locator('#jobs tbody tr[data-job-id="denied-1"]').click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded, 1 denied", timeout=WAIT)
        await expect(page.locator("#detail-denials")).to_be_visible()
        await expect(page.locator("#detail-denials li")).to_have_text(["Write notes.md"])
        await expect(page.locator('#tree li[data-job-id="denied-1"] .status').first).to_have_text(
            "succeeded, 1 denied", timeout=WAIT)
        shot = tmp_path / "dashboard-denials.png"
        await page.locator("#detail").screenshot(path=str(shot))
        save_screenshot(shot)
        await page.locator('#jobs tbody tr[data-job-id="plain-1"]').click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=WAIT)
        await expect(page.locator("#detail-denials")).to_be_hidden()

        # A page loaded after the jobs ended reads the same from its first snapshot and from /api/jobs.
        await page.reload()
        await expect(denied).to_have_text("succeeded, 1 denied", timeout=WAIT)
        with urllib.request.urlopen(f"{page_url.rstrip('/')}/api/jobs") as answer:
            listed = {job["job_id"]: job for job in json.load(answer)["jobs"]}
        assert listed["denied-1"]["denials"] == ["Write notes.md"] and listed["plain-1"]["denials"] == []

    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert jobs.returncode == 0, jobs.stderr
    header, *rows = jobs.stdout.decode().splitlines()
    assert header.split()[:3] == ["JOB", "STATUS", "DENIED"], header
    by_job = {line.split()[0]: line.split() for line in rows}
    assert by_job["denied-1"][1:3] == ["succeeded", "1"] and by_job["plain-1"][1:3] == ["succeeded", "-"]


async def test_mam_jobs_has_no_denied_column_when_no_listed_job_was_denied(ws: WorkspacePaths) -> None:
    async with up_with_dashboard(ws) as (url, _), publisher(url, ws) as pub:
        await pub.submit(prompt="nobody runs this", agent="nobody", job_id="queued-1", wait=True)
    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert jobs.returncode == 0 and "DENIED" not in jobs.stdout.decode(), jobs.stdout
