"""A job whose agent was refused tool calls at its permission level does not read as a plain success: in the
dashboard (Debian's headless Chromium, Playwright), in `mam jobs` and in `mam jobs --watch`.

The real Claude Code (tests/agent_clis.py) under `--permission-mode plan`, told by its model server to Write a
file, is refused and reports it in its result's `permission_denials`; the job succeeds and records the denial.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import urllib.request
from pathlib import Path

import anyio
import pytest
from agent_clis import CLIS
from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_runner
from watch_support import _read_until

from e2e import workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

WAIT = 15_000


@pytest.mark.slow
async def test_denied_edits_show_in_the_list_the_detail_the_api_and_mam_jobs(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    script = Script(
        [
            Turn(tool="Write", args={"file_path": "notes.md", "content": "notes\n"}),
            Turn(text="I could not write notes.md"),
            Turn(text="hi"),
        ]
    )
    refused = f"Write {ws.root / 'notes.md'}"
    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await page.goto(page_url)
        async with real_runner(CLIS["claude-code"], url, ws, script, "--permissions", "read-only", name="r-plan"):
            for job_id, prompt in (
                ("denied-1", "please edit the notes"),
                ("plain-1", "say hi"),
            ):  # in the script's order
                await pub.submit(prompt=prompt, agent="claude-code", job_id=job_id, wait=True)
                await wait_for_state(
                    url, ws_id, job_id, lambda r: r["status"] in ("succeeded", "failed"), timeout=JOB_TIMEOUT
                )

        denied = page.locator('#jobs tbody tr[data-job-id="denied-1"] .status')
        await expect(denied).to_have_text("succeeded, 1 denied", timeout=WAIT)
        assert await denied.get_attribute("data-denials") == "1"
        assert await denied.get_attribute("title") == refused
        plain = page.locator('#jobs tbody tr[data-job-id="plain-1"] .status')
        await expect(plain).to_have_text("succeeded")
        assert await plain.get_attribute("data-denials") is None

        await page.locator('#jobs tbody tr[data-job-id="denied-1"]').click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded, 1 denied", timeout=WAIT)
        await expect(page.locator("#detail-denials")).to_be_visible()
        await expect(page.locator("#detail-denials li")).to_have_text([refused])
        await expect(page.locator('#tree li[data-job-id="denied-1"] .status').first).to_have_text(
            "succeeded, 1 denied", timeout=WAIT
        )
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
        assert listed["denied-1"]["denials"] == [refused] and listed["plain-1"]["denials"] == []
        watched = await watch_screen(url, ws)

    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert jobs.returncode == 0, jobs.stderr
    header, *rows = jobs.stdout.decode().splitlines()
    assert header.split()[:3] == ["JOB", "STATUS", "DENIED"], header
    by_job = {line.split()[0]: line.split() for line in rows}
    assert by_job["denied-1"][1:3] == ["succeeded", "1"] and by_job["plain-1"][1:3] == ["succeeded", "-"]
    header, *rows = [line.strip() for line in watched.splitlines() if line.strip()]
    assert header.split()[:3] == ["JOB", "STATUS", "DENIED"], watched
    by_job = {line.split()[0]: line.split() for line in rows if line.split()[0] in ("denied-1", "plain-1")}
    assert by_job["denied-1"][1:3] == ["succeeded", "1"] and by_job["plain-1"][1:3] == ["succeeded", "-"], watched


async def watch_screen(url: str, ws: WorkspacePaths) -> str:
    """The first screen `mam jobs --watch` draws on a terminal (NO_COLOR: plain text), its escape codes removed."""
    master, slave = pty.openpty()
    try:
        proc = await anyio.open_process(
            mam("jobs", "--watch", "--broker", url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            stdout=slave,
            env=child_env(NO_COLOR="1"),
        )
        async with proc:
            seen = await _read_until(master, b"Ctrl-C to stop")
            proc.send_signal(signal.SIGINT)
            with anyio.fail_after(10):
                assert await proc.wait() == 0
    finally:
        os.close(master)
        os.close(slave)
    frame = seen.decode().rpartition("\x1b[H\x1b[2J")[2]
    return frame.replace("\x1b[?25l", "").rpartition("\n")[0]


async def test_mam_jobs_has_no_denied_column_when_no_listed_job_was_denied(ws: WorkspacePaths) -> None:
    async with up_with_dashboard(ws) as (url, _), publisher(url, ws) as pub:
        await pub.submit(prompt="nobody runs this", agent="nobody", job_id="queued-1", wait=True)
    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert jobs.returncode == 0 and "DENIED" not in jobs.stdout.decode(), jobs.stdout
