"""The dashboard in a real browser (Debian's headless Chromium, driven by Playwright).

One page stays open while things happen elsewhere: everything it shows
arrives over its one event stream, never by a reload. Waits are Playwright's
`expect` with timeouts, never sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard
from runner_support import agent_runner, mock_command
from set_aside_support import HOOK, POISON, REASON

from mam.contract.topics import Topics

from e2e import workspace_id
from support import publish
from workspace_support import WorkspacePaths

WAIT = 15_000


def row(page, job_id: str):  # noqa: ANN001, ANN201 - playwright's Page and Locator
    return page.locator(f'#jobs tbody tr[data-job-id="{job_id}"]')


@pytest.mark.slow
async def test_page_follows_a_job_from_submit_to_success_and_cancels_a_running_one(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await page.goto(page_url)
        await expect(page.locator("#projector")).to_contain_text("projector online", timeout=WAIT)

        # A job submitted after the page loaded appears without a reload, newest first.
        gate = tmp_path / "web-stream.gate"  # the job runs until the test has seen its output stream in
        await pub.submit(
            prompt=f"stream 40 gate {gate}", agent="mock", job_id="web-stream", labels={"team": "web"}, wait=True
        )
        await expect(row(page, "web-stream").locator(".status")).to_have_text("submitted", timeout=WAIT)
        hostile = "<img src=x onerror=\"document.title='owned'\">"
        await pub.submit(prompt=hostile, agent="other", job_id="web-hostile", wait=True)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "web-hostile")
        await expect(row(page, "web-hostile")).to_contain_text("<img src=x")  # shown as text, never as markup
        assert await page.locator("#jobs img").count() == 0 and await page.title() == "mam dashboard"

        async with agent_runner(url, ws, *mock_command(), name="r-web"):
            await expect(page.locator('#agents tr[data-agent-id="r-web"]')).to_contain_text("online", timeout=WAIT)
            # Its status moves as the runner works it; its output streams into the open detail view.
            await expect(row(page, "web-stream").locator(".status")).to_have_text("running", timeout=WAIT)
            await row(page, "web-stream").click()
            await expect(page.locator("#output")).to_contain_text("line 3", timeout=WAIT)
            assert await page.locator("#detail-status").text_content() == "running", "output came only at the end"
            gate.touch()
            await expect(row(page, "web-stream").locator(".status")).to_have_text("succeeded", timeout=WAIT)
            await expect(page.locator("#output")).to_contain_text("line 39", timeout=WAIT)
            await expect(page.locator("#detail-status")).to_have_text("succeeded")
            await expect(page.locator("#events")).to_contain_text("succeeded")
            await expect(page.locator("#cancel")).to_be_hidden()

            # The cancel button cancels a running job, through the projector, and says so.
            await pub.submit(prompt="hang", agent="mock", job_id="web-hang", wait=True)
            await expect(row(page, "web-hang").locator(".status")).to_have_text("running", timeout=WAIT)
            await row(page, "web-hang").click()
            await expect(page.locator("#output")).to_contain_text("hanging", timeout=WAIT)
            await page.locator("#cancel").click()  # asks first, in the page: a reason, the tree or not
            await page.locator("#cancel-form input[name=reason]").fill("no longer needed")
            await page.locator("#confirm-cancel").click()
            await expect(page.locator("#verdict")).to_contain_text(
                "cancel requested: web-hang (was running; it ends once its runner stops it)", timeout=WAIT
            )
            await expect(row(page, "web-hang").locator(".status")).to_have_text("cancelled", timeout=WAIT)

        # Refused events appear with their reasons.
        await publish(url, Topics(workspace_id(ws.root)).events("web-stream"), json.dumps({"type": "started"}).encode())
        await expect(page.locator("#refusals")).to_contain_text("web-stream", timeout=WAIT)
        await expect(page.locator("#refusals .reason").first).to_contain_text("finished job")

        # Filters: by label, by status, by agent; the table follows them live.
        filters = page.locator("#filters")
        await filters.locator("input[name=label]").fill("team=web")
        await filters.locator("button").click()
        await expect(page.locator("#jobs tbody tr")).to_have_count(1)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "web-stream")
        await filters.locator("input[name=label]").fill("")
        await filters.locator("select[name=status]").select_option("cancelled")
        await expect(page.locator("#jobs tbody tr")).to_have_count(1)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "web-hang")
        await filters.locator("select[name=status]").select_option("")
        await filters.locator("input[name=agent]").fill("other")
        await filters.locator("button").click()
        await expect(page.locator("#jobs tbody tr")).to_have_count(1)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "web-hostile")

        await filters.locator("input[name=agent]").fill("")
        await filters.locator("button").click()
        await expect(page.locator("#jobs tbody tr")).to_have_count(3)
        await row(page, "web-stream").click()
        await expect(page.locator("#output")).to_contain_text("line 39", timeout=WAIT)
        shot = tmp_path / "dashboard.png"
        await page.screenshot(path=str(shot))
        save_screenshot(shot)


async def test_with_a_password_file_the_browser_logs_in_and_gets_the_live_page(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from dashboard_server_support import dashboard
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import expect

    from mam.broker.passwords import set_password

    passwords = tmp_path / "passwd"
    set_password(passwords, "ada", "s3cret")
    async with up_with_dashboard(ws) as (url, _), dashboard(ws.root, url, password_file=passwords) as page_url:
        async with browser_page() as page:
            with pytest.raises(PlaywrightError, match="AUTH"):  # the browser got a 401 and no page
                await page.goto(page_url)
        async with browser_page(http_credentials={"username": "ada", "password": "s3cret"}) as page:
            await page.goto(page_url)
            await expect(page.locator("#projector")).to_contain_text("projector online", timeout=WAIT)
            async with publisher(url, ws) as pub:
                await pub.submit(prompt="p", agent="nobody", job_id="web-login", wait=True)
            await expect(row(page, "web-login").locator(".status")).to_have_text("submitted", timeout=WAIT)


async def test_a_long_prompt_is_cut_in_the_list_and_shown_whole_in_the_detail(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    prompt = "begin " + "word " * 2000 + "END-OF-PROMPT"
    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await pub.submit(prompt=prompt, agent="nobody", job_id="web-long", wait=True)
        await page.goto(page_url)
        await expect(row(page, "web-long")).to_contain_text("begin word", timeout=WAIT)
        await row(page, "web-long").click()
        # The stream carried 200 characters of it; opening the job fetched the whole record.
        await expect(page.locator("#record")).to_contain_text("END-OF-PROMPT", timeout=WAIT)
        shown = await page.locator("#record tr", has_text="END-OF-PROMPT").locator("div").text_content()
        assert shown == prompt
        assert await page.locator("#record").get_by_text("prompt_cut").count() == 0


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_the_refusals_panel_says_how_many_messages_are_set_aside_and_why(ws: WorkspacePaths) -> None:
    """A message the projector fails to handle (the test hook) is set aside: the page says so beside the refused
    events, from the projector's status (the count of `_set_aside.jsonl`, across restarts), with the command."""
    from playwright.async_api import expect

    async with up_with_dashboard(ws, env={"MAM_TEST_FAIL": HOOK}) as (url, page_url), browser_page() as page:
        await page.goto(page_url)
        await expect(page.locator("#projector")).to_contain_text("projector online", timeout=WAIT)
        notice = page.locator("#set-aside")
        await expect(notice).to_be_hidden()
        await publish(url, Topics(workspace_id(ws.root)).events("poison-1"), POISON)
        await expect(notice).to_contain_text("1 message set aside (a projector fault, not a refusal)", timeout=WAIT)
        await expect(notice).to_contain_text(REASON)
        await expect(notice).to_contain_text("mam set-aside --replay --all tries them again.")
