"""The dashboard's first screen, as a user sees it in Chromium (Debian's, headless, driven by Playwright) at
1280x800 and 1920x1080: the job list is on it with each prompt readable; a queued job says why it waits, on
its row and its page; a job stopped by a signal reads as the signal; an outcome says each thing once; a job
with no output says so in a sentence; events and refused events read as fields, never JSON; the refused
events of the main page are the last hour's, dismissible, with the rest one click away; no raw ISO time sits
among the local ones; timeline labels never overlap, at any width. Screenshots of each size are kept
(`MAM_ARTIFACTS_DIR`).

Waits are Playwright's `expect` or `wait_for_function` with timeouts, never sleeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_screen_support import CODEX_PROMPT, OLD_REFUSAL_REASON, READABLE_PROMPT, morning, old_refusal
from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard

from mam.contract.topics import Topics

from e2e import workspace_id
from support import publish
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

WAIT = 15_000
# The wide screen is the same page laid out again: its checks run with -m slow (the 1280x800 ones by default).
VIEWPORTS = [
    pytest.param((1280, 800), id="1280x800"),
    pytest.param((1920, 1080), id="1920x1080", marks=pytest.mark.slow),
]
BOX = "(node) => node.getBoundingClientRect().toJSON()"
BOXES = (
    "(nodes) => nodes.map((n) => { const b = n.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })"
)
ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d"
DRAWN_AT_WIDTH = """() => { const t = document.querySelector('#timeline'); const s = t.querySelector('svg');
  return s && Math.abs(Number(s.getAttribute('width')) - Math.max(320, Math.round(t.clientWidth))) <= 1; }"""


def row(page, job_id: str):  # noqa: ANN001, ANN201 - playwright's Page and Locator
    return page.locator(f'#jobs tbody tr[data-job-id="{job_id}"]')


def overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[:i])
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


async def shot(page, tmp_path: Path, name: str) -> None:  # noqa: ANN001 - playwright's Page
    path = tmp_path / name
    await page.evaluate("() => window.scrollTo(0, 0)")
    await page.screenshot(path=str(path))
    save_screenshot(path)


async def no_raw_times(page) -> None:  # noqa: ANN001 - playwright's Page
    """The page's visible text holds no ISO 8601 time: every time reads as local (the raw record is closed)."""
    found = await page.evaluate(f"() => document.body.innerText.match(/{ISO_TIME}[^\\s]*/g)")
    assert not found, found


async def labels_apart(page) -> int:  # noqa: ANN001 - playwright's Page
    """No two timeline labels' boxes intersect, nor does one leave the timeline; how many labels there are."""
    labels = page.locator("#timeline .event text.label")
    boxes = await labels.evaluate_all(BOXES)
    assert overlapping(boxes) == [], boxes
    frame = await page.locator("#timeline svg").evaluate(BOXES.replace("nodes.map", "[nodes].map"))
    left, top, right, bottom = frame[0]
    assert all(left <= b[0] and b[2] <= right + 0.5 and top <= b[1] and b[3] <= bottom for b in boxes), (frame, boxes)
    return len(boxes)


@pytest.mark.parametrize("viewport", VIEWPORTS)
async def test_the_first_screen_shows_the_jobs_and_why_each_waits_or_ended(
    ws: WorkspacePaths, tmp_path: Path, viewport: tuple[int, int]
) -> None:
    from playwright.async_api import expect

    width, height = viewport
    old_refusal(ws.logs)
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page(viewport=viewport) as page,
    ):
        await morning(pub, url, Topics(workspace_id(ws.root)))
        await page.goto(page_url)
        await expect(row(page, "readable")).to_be_visible(timeout=WAIT)
        await expect(page.locator("#refusals li")).to_have_count(2, timeout=WAIT)
        await expect(row(page, "queued-codex").locator(".waits")).to_be_visible(timeout=WAIT)
        await shot(page, tmp_path, f"dashboard-first-screen-{width}x{height}.png")

        # The job list is on the first screen, its newest row whole within the window, below the runners
        # and the refused events (which are on it too).
        first = page.locator("#jobs tbody tr").first
        await expect(first).to_have_attribute("data-job-id", "readable")
        box = await first.evaluate(BOX)
        assert 0 < box["y"] and box["y"] + box["height"] <= height, (box, height)
        for panel in ("#runners-panel", "#refusals-panel"):
            top = (await page.locator(panel).evaluate(BOX))["y"]
            assert 0 < top < box["y"], (panel, top)
        # Each prompt readable: the prompt column keeps a good share of the table, and a 70-character prompt
        # shows whole.
        prompt = first.locator("td.prompt .text")
        await expect(prompt).to_have_text(READABLE_PROMPT)
        shown, whole, cell = await prompt.evaluate("(d) => [d.clientWidth, d.scrollWidth, d.parentElement.clientWidth]")
        table = await page.locator("#jobs").evaluate("(t) => t.clientWidth")
        assert whole <= shown and cell >= 0.35 * table, (shown, whole, cell, table)

        # A queued job says why it waits on its row: no runner for its agent, none with its labels, every
        # slot taken and jobs of higher priority first, blocked on the job it runs --after.
        waits = {
            job: row(page, job).locator("td.prompt .waits")
            for job in ("queued-codex", "needs-gpu", "low-prio", "after-it")
        }
        await expect(waits["queued-codex"]).to_have_text(
            "queued: no runner for 'codex' is online (start one with `mam-agent --agent codex`)"
        )
        await expect(waits["needs-gpu"]).to_contain_text("no runner online for 'shell' has gpu=yes")
        await expect(waits["low-prio"]).to_have_text(
            "queued: every runner for 'shell' is busy (1 online); 2 queued jobs of higher priority go first"
        )
        await expect(waits["after-it"]).to_have_text("blocked until queued-codex succeeded")
        assert await row(page, "timed-out").locator(".waits").count() == 0

        # A job stopped by a signal reads as the signal, not exit -15.
        await expect(row(page, "timed-out").locator("td.c-exit")).to_have_text("SIGTERM")
        await expect(row(page, "failed-1").locator("td.c-exit")).to_have_text("1")

        # Refused events read as fields: the last hour's only (the typo of two hours ago is one click away).
        refusals = page.locator("#refusals")
        text = await refusals.text_content()
        assert '{"' not in text and OLD_REFUSAL_REASON not in text, text
        keys = await refusals.locator(".field .k").all_text_contents()
        assert {"type", "runner", "epoch", "exit_code"} <= set(keys), keys
        await no_raw_times(page)

        # The page of a queued job says why it waits, as its row does.
        await row(page, "queued-codex").click()
        await expect(page.locator("#detail-waits")).to_have_text(
            "queued: no runner for 'codex' is online (start one with `mam-agent --agent codex`)", timeout=WAIT
        )
        await expect(page.locator('#record tr[data-key="prompt"] td')).to_have_text(CODEX_PROMPT)
        await expect(page.locator("#no-output")).to_have_text("No output yet: the job has not started.")
        box = await page.locator("#jobs tbody tr").first.evaluate(BOX)
        assert box["y"] + box["height"] <= height, box  # with a job open beside it too

        # A timed-out job: the signal, said once, and its events as fields.
        await row(page, "timed-out").click()
        outcome = page.locator('#record tr[data-key="outcome"] td')
        await expect(outcome).to_have_text("timed out after 2s; stopped by SIGTERM", timeout=WAIT)
        assert "-15" not in await page.locator("#record").text_content()
        await expect(page.locator("#detail-waits")).to_be_hidden()
        details = page.locator("#events td.details")
        await expect(details).to_have_count(4)
        assert not any('{"' in t for t in await details.all_text_contents())
        claimed = page.locator('#events tr:has(td.type:text-is("claimed")) .field')
        assert (await claimed.locator(".k").all_text_contents())[:2] == ["runner", "epoch"]
        await no_raw_times(page)

        # "exit code 1", once; a job with no output says so in a sentence, not an empty pane.
        await row(page, "failed-1").click()
        await expect(outcome).to_have_text("exit code 1", timeout=WAIT)
        await row(page, "silent").click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=WAIT)
        await expect(page.locator("#no-output")).to_have_text("This job printed nothing.")
        await expect(page.locator("#output")).to_be_hidden()

        # Twelve events 10 ms apart (eleven to label): labels spread along the axis, none over another, at this
        # width and at others (the page draws the timeline again at its new width).
        await row(page, "crowded").click()
        await expect(page.locator("#detail-status")).to_have_text("cancelled", timeout=WAIT)
        await expect(page.locator("#timeline .event")).to_have_count(12, timeout=WAIT)
        assert await labels_apart(page) >= 8
        await shot(page, tmp_path, f"dashboard-timeline-{width}x{height}.png")
        for other in (900, 1100, 1600):
            await page.set_viewport_size({"width": other, "height": height})
            await page.wait_for_function(DRAWN_AT_WIDTH, timeout=WAIT)
            assert await labels_apart(page) >= 4, other
        await page.set_viewport_size({"width": width, "height": height})
        await page.wait_for_function(DRAWN_AT_WIDTH, timeout=WAIT)


async def test_refused_events_of_the_last_hour_are_dismissed_and_all_are_one_click_away(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    old_refusal(ws.logs)
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page(viewport=(1280, 800)) as page,
    ):
        await morning(pub, url, Topics(workspace_id(ws.root)))
        await page.goto(page_url)
        items = page.locator("#refusals li")
        await expect(items).to_have_count(2, timeout=WAIT)
        await expect(page.locator("#refusal-count")).to_have_text("2 in the last hour")
        await page.locator("#refusals-dismiss").click()
        await expect(items).to_have_count(0)
        await expect(page.locator("#no-refusals")).to_have_text("None since you dismissed them.")
        await page.reload()  # remembered in this browser
        await expect(page.locator("#no-refusals")).to_have_text("None since you dismissed them.", timeout=WAIT)
        all_link = page.locator("#refusals-all")
        await expect(all_link).to_have_text("show all 3")
        await all_link.click()
        await expect(items).to_have_count(3)
        await expect(page.locator("#refusals")).to_contain_text(OLD_REFUSAL_REASON)
        assert "refusals=all" in page.url
        assert '{"' not in await page.locator("#refusals").text_content()
        await all_link.click()
        await expect(items).to_have_count(0)
        # A new refusal shows again on the main page.
        await publish(url, Topics(workspace_id(ws.root)).events("after-it"), b'{"type":"canceled"}')
        await expect(items).to_have_count(1, timeout=WAIT)


@pytest.mark.parametrize("viewport", VIEWPORTS)
async def test_empty_states_say_what_to_do_next(ws: WorkspacePaths, tmp_path: Path, viewport: tuple[int, int]) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), browser_page(viewport=viewport) as page:
        await page.goto(page_url)
        await expect(page.locator("#projector")).to_contain_text("projector online", timeout=WAIT)
        await expect(page.locator("#no-jobs-yet")).to_be_visible(timeout=WAIT)
        await expect(page.locator("#no-jobs-yet")).to_contain_text("mam submit --agent shell --prompt 'echo hello'")
        await expect(page.locator("#no-runners")).to_contain_text("mam-agent --agent shell")
        await expect(page.locator("#no-refusals")).to_be_visible()
        await expect(page.locator("#chart-finished")).to_contain_text("No job finished in this window.", timeout=WAIT)
        await shot(page, tmp_path, f"dashboard-empty-{viewport[0]}x{viewport[1]}.png")
        async with publisher(url, ws) as pub:
            await pub.submit(prompt="echo hello", agent="shell", job_id="hello", wait=True)
        await expect(row(page, "hello")).to_be_visible(timeout=WAIT)
        await expect(page.locator("#no-jobs")).to_be_hidden()
        await page.locator("#filters input[name=q]").fill("no such words")
        await page.locator("#filters button[type=submit]").click()
        await expect(page.locator("#no-jobs-match")).to_be_visible(timeout=WAIT)
        await page.locator("#clear-filters").click()
        await expect(row(page, "hello")).to_be_visible(timeout=WAIT)
