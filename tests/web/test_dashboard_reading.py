"""The dashboard reads like Temporal's UI, in a real browser (Debian's headless Chromium, Playwright) at
1280 and 1920 wide: ids show the part that tells them apart (whole on hover, one click to copy), the record
panel is a summary with the bookkeeping one click away, timeline labels never overlap, and the runners and
refused events are in the first screen above a full page of jobs.

One dashboard and one browser per width: every check reads the same page. Waits are Playwright's `expect`
with timeouts, never sleeps.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard

from mam.contract import events as ev
from mam.contract.status import AgentStatus
from mam.contract.timefmt import utc_now
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
PREFIX = "job-20261204-120000-"  # two generated ids from the same second
RUNNERS = ["shell-build-host-with-a-rather-long-name-18341", "shell-build-host-with-a-rather-long-name-18342"]
RESULT = "\x1b[31mred result\x1b[0m and \x1b[1mbold\x1b[0m\n"
BOOKKEEPING = [
    "runner_epoch",
    "last_event_id",
    "version",
    "git_at_submit",
    "git_at_finish",
    "output_seqs",
    "outputs_expected",
    "updated_at",
]
FITS = "(s) => { const card = document.querySelector(s); return [card.scrollWidth, card.clientWidth]; }"
BOXES = (
    "(nodes) => nodes.map((n) => { const b = n.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })"
)


def row(page, job_id: str):  # noqa: ANN001, ANN201 - playwright's Page and Locator
    return page.locator(f'#jobs tbody tr[data-job-id="{job_id}"]')


def overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[:i])
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


async def in_first_screen(page, height: int) -> None:  # noqa: ANN001 - playwright's Page
    """The runners' and refused events' panels start in the page's first `height` pixels (their headings
    and a first line show without scrolling)."""
    for panel in ("#runners-panel", "#refusals-panel"):
        top = await page.locator(panel).evaluate("(p) => p.getBoundingClientRect().top + window.scrollY")
        assert 0 < top and top + 40 < height, (panel, top)


async def close_together(pub, job_id: str) -> None:  # noqa: ANN001 - the Publisher
    """A job whose lifecycle events are 10 ms apart, with a coloured result and git at both ends."""
    t0 = utc_now()
    at = lambda n: t0 + timedelta(milliseconds=10 * n)  # noqa: E731
    git = ev.GitInfo(commit="a1b2c3d4e5f6" + "0" * 28, branch="main")
    for event in (
        ev.Submitted(prompt="events close together", agent="shell", git=git, ts=at(0)),
        ev.Claimed(runner=RUNNERS[0], epoch="e1", ts=at(1)),
        ev.Started(runner=RUNNERS[0], counts_outputs=True, ts=at(2)),
        ev.Output(text="one line\n", seq=0, ts=at(3)),
        ev.Succeeded(result=RESULT, git=ev.GitInfo(commit="f" * 40, branch="feature-x"), outputs=1, ts=at(4)),
    ):
        await pub.publish_and_wait(job_id, event)


async def crowded(pub, job_id: str) -> None:  # noqa: ANN001 - the Publisher
    """Seven lifecycle events 10 ms apart: more than the timeline has label rows for."""
    t0 = utc_now()
    at = lambda n: t0 + timedelta(milliseconds=10 * n)  # noqa: E731
    asked = ev.InputRequested(question="go on?", ts=at(3), id="q" * 32)
    for event in (
        ev.Submitted(prompt="a crowded timeline", agent="shell", ts=at(0)),
        ev.Claimed(runner=RUNNERS[1], ts=at(1)),
        ev.Started(runner=RUNNERS[1], ts=at(2)),
        asked,
        ev.InputProvided(answer="yes", question_id=asked.id, ts=at(4)),
        ev.CancelRequested(reason="enough", ts=at(5)),
        ev.Cancelled(reason="enough", ts=at(6)),
    ):
        await pub.publish_and_wait(job_id, event)


@pytest.mark.parametrize("viewport", VIEWPORTS)
async def test_ids_record_timeline_and_layout_read_well(
    ws: WorkspacePaths, tmp_path: Path, viewport: tuple[int, int]
) -> None:
    from playwright.async_api import expect

    suffixes = [secrets.token_hex(3) for _ in range(52)]
    ids = [PREFIX + suffix for suffix in suffixes]
    topics = Topics(workspace_id(ws.root))
    context = {"permissions": ["clipboard-read", "clipboard-write"]}
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page(viewport=viewport, **context) as page,
    ):
        for n, job_id in enumerate(ids):
            await pub.submit(prompt=f"task {n}", agent="nobody", job_id=job_id, wait=n == len(ids) - 1)
        now = utc_now().isoformat()
        for pid, runner in enumerate(RUNNERS, start=18341):
            status = AgentStatus(
                status="online",
                agent="shell",
                agent_id=runner,
                epoch=f"e{pid}",
                pid=pid,
                host="build-host-with-a-rather-long-name",
                started_at=now,
                updated_at=now,
            )
            await publish(url, topics.agent_status(runner), msgspec.json.encode(status), retain=True)
        await publish(url, topics.events(ids[0]), json.dumps({"type": "started"}).encode())  # refused: not claimed
        close, busy = PREFIX + "c1053d", PREFIX + "b05e11"
        await close_together(pub, close)
        await crowded(pub, busy)
        await page.goto(page_url)
        await expect(page.locator("#jobs tbody tr")).to_have_count(50, timeout=WAIT)
        await expect(page.locator("#refusals li")).to_have_count(1, timeout=WAIT)
        await expect(page.locator("#agents tbody tr")).to_have_count(2, timeout=WAIT)

        # Ids: two generated ids of the same second read differently (their short ids); whole on hover.
        first, second = ids[-1], ids[-2]  # newest first: both on the first page
        shown = [await row(page, job).locator("td.id .shown").text_content() for job in (first, second)]
        assert shown == [suffixes[-1], suffixes[-2]] and shown[0] != shown[1], shown
        assert await row(page, first).locator("td.id").get_attribute("title") == first
        # The copy button copies the whole id and does not open the job.
        await row(page, first).hover()
        await row(page, first).locator("td.id button.copy").click()
        assert await page.evaluate("() => navigator.clipboard.readText()") == first
        await expect(row(page, first).locator("td.id button.copy")).to_have_attribute("data-copied", "yes")
        assert await page.locator("#detail").is_hidden()
        # Runner ids: what tells them apart (their pids), not a cut prefix; whole on hover.
        runners = [await page.locator(f'#agents tr[data-agent-id="{r}"] td.id .shown').text_content() for r in RUNNERS]
        assert runners[0] != runners[1] and runners[0].endswith("18341") and runners[1].endswith("18342"), runners
        assert (
            await page.locator(f'#agents tr[data-agent-id="{RUNNERS[0]}"] td.id').get_attribute("title") == RUNNERS[0]
        )

        # Layout: the runners and refused events are in the first screen, above the 50-row table.
        await in_first_screen(page, viewport[1])
        assert await page.evaluate("() => document.documentElement.scrollHeight") > viewport[1]  # the table is long

        # The record panel: a summary; the bookkeeping only in the raw record, one click away.
        await row(page, close).click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=WAIT)
        await expect(page.locator("#detail-id")).to_have_text(close)
        await in_first_screen(page, viewport[1])  # with a job open beside the table too
        copy = page.get_by_role("button", name="copy job id")  # beside the open job's whole id
        await copy.click()
        assert await page.evaluate("() => navigator.clipboard.readText()") == close
        record = page.locator("#record")
        await expect(record.locator('tr[data-key="result"] pre.result')).to_have_text(
            "red result and bold", timeout=WAIT
        )
        labels = await record.locator("th").all_text_contents()
        for label in (
            "status",
            "agent",
            "runner",
            "submitted",
            "started",
            "finished",
            "duration",
            "outcome",
            "result",
            "git",
            "prompt",
        ):
            assert label in labels, labels
        assert await record.locator('tr[data-key="outcome"] td').text_content() == "exit code 0"
        assert await record.locator('tr[data-key="runner"] .shown').text_content() == RUNNERS[0]
        assert await record.locator("span.ansi-fg-1").text_content() == "red result"
        git = await record.locator('tr[data-key="git"] td').text_content()
        assert "a1b2c3d4e5f6 on main (at submit)" in git and "ffffffffffff on feature-x (at finish)" in git, git
        shown_text = await record.text_content()
        assert "\x1b" not in shown_text and "[31m" not in shown_text
        for key in BOOKKEEPING:
            assert key not in shown_text and key.replace("_", " ") not in labels, key
        raw = page.locator("#raw-record pre")
        await expect(raw).to_be_hidden()
        await page.locator("#raw-record summary").click()
        await expect(raw).to_be_visible()
        stored = json.loads(await raw.text_content())
        assert stored["job_id"] == close and stored["runner_epoch"] == "e1" and stored["version"] == 5, stored
        assert stored["git_at_submit"]["branch"] == "main" and stored["result"] == RESULT

        # Timeline: events 10 ms apart, every lifecycle event labelled, no two labels overlapping.
        labelled = page.locator("#timeline .event text.label")
        await expect(labelled).to_have_count(4, timeout=WAIT)
        assert await labelled.all_text_contents() == ["submitted", "claimed", "started", "succeeded"]
        boxes = await labelled.evaluate_all(BOXES)
        assert overlapping(boxes) == [], boxes
        # Seven events 10 ms apart: spread along the axis, the labels that fit never overlap, any other is named
        # on hover.
        await row(page, busy).click()
        await expect(page.locator("#detail-status")).to_have_text("cancelled", timeout=WAIT)
        await expect(page.locator("#timeline .event")).to_have_count(7, timeout=WAIT)
        labelled = page.locator("#timeline .event text.label")
        assert 4 <= await labelled.count() <= 7
        assert overlapping(await labelled.evaluate_all(BOXES)) == []
        unlabelled = page.locator("#timeline .event[data-unlabelled] title")
        assert await unlabelled.count() == 7 - await labelled.count()
        assert all(" at " in title for title in await unlabelled.all_text_contents())
        await row(page, close).click()
        await expect(page.locator("#detail-id")).to_have_text(close, timeout=WAIT)
        await expect(page.locator("#timeline .event text.label")).to_have_count(4, timeout=WAIT)
        # Axis labels at a readable size: drawn at the page's own scale (12 px and 11 px text).
        for text in ("#timeline text.label", "#timeline text.tick", "#chart-queue text.tick"):
            size = await page.locator(text).first.evaluate(
                "(t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a"
            )
            assert size >= 11, (text, size)
        for card in ("#list", "#detail", "html"):
            scroll, client = await page.evaluate(FITS, card)
            assert scroll <= client, f"{card} overflows: scrollWidth {scroll} > clientWidth {client}"
        await page.evaluate("() => window.scrollTo(0, 0)")
        shot = tmp_path / f"dashboard-reading-{viewport[0]}.png"
        await page.screenshot(path=str(shot))
        save_screenshot(shot)
