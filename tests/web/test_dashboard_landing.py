"""The dashboard's review and landing of a worktree job, in headless Chromium over a real `mam up --dashboard`:
the job's diff in its detail (from `/api/jobs/ID/diff`), a merge and a discard button behind a confirmation,
and the routes' own refusals (a form post, a job without a branch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_landing_support import post
from dashboard_support import browser_page, save_screenshot, up_with_dashboard
from landing_support import has_branch, run_jobs, user_repo
from runner_support import agent_runner
from worktrees_support import runner_env

from workspace_support import WorkspacePaths

WAIT = 20_000


@pytest.mark.slow
async def test_the_detail_shows_a_worktree_jobs_diff_and_merges_or_discards_it(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    user_repo(ws.root)
    flags = ("--command", "sh -s", "--worktree")
    async with up_with_dashboard(ws) as (url, page_url):
        async with agent_runner(url, ws, *flags, name="r-sh", agent="sh", env=runner_env(tmp_path)):
            await run_jobs(url, ws, {"web-1": "echo 'from the web job' > web.txt", "web-2": "echo no > a.txt"})
        base = page_url.rstrip("/")
        assert post(f"{base}/api/jobs/web-1/merge", "application/x-www-form-urlencoded")[0] == 415
        assert has_branch(ws.root, "web-1"), "a form post (what another site can send) merges nothing"

        async with browser_page() as page:
            dialogs: list[str] = []

            async def accept(dialog: object) -> None:
                dialogs.append(dialog.message)  # type: ignore[attr-defined]
                await dialog.accept()  # type: ignore[attr-defined]

            page.on("dialog", accept)
            await page.goto(f"{page_url}?job=web-1")
            await expect(page.locator("#diff")).to_contain_text("+from the web job", timeout=WAIT)
            await expect(page.locator("#diff-stat")).to_contain_text("1 file changed, 1 insertion(+)")
            await page.locator("#merge").click()
            await expect(page.locator("#verdict")).to_contain_text(
                "merged job web-1 into main: fast-forward", timeout=WAIT
            )
            assert dialogs == ["Merge job web-1 into the workspace checkout's current branch?"]
            assert (ws.root / "web.txt").read_text() == "from the web job\n" and not has_branch(ws.root, "web-1")
            await expect(page.locator("#diff-note")).to_contain_text("branch mam/web-1 is gone", timeout=WAIT)
            await expect(page.locator("#landing")).to_be_hidden()
            shot = tmp_path / "dashboard-landing.png"
            await page.screenshot(path=str(shot))
            save_screenshot(shot)

            await page.goto(f"{page_url}?job=web-2")
            await expect(page.locator("#diff")).to_contain_text("+no", timeout=WAIT)
            await page.locator("#discard").click()
            await expect(page.locator("#verdict")).to_contain_text("discarded job web-2", timeout=WAIT)
            assert dialogs[-1].startswith("Discard job web-2") and not has_branch(ws.root, "web-2")
            assert (ws.root / "a.txt").read_text() == "one\n", "discarding touched no file of the checkout"
