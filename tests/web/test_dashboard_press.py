"""A press on a job's row opens it even when the table is drawn anew between the button going down and
up, as it is on every change while a job streams output (a row's own click was lost then: the full run
caught test_page_follows_a_job... clicking a running job's row and the detail never opening). A press on a
row's copy button opens nothing."""

from __future__ import annotations

import pytest
from dashboard_support import browser_page, publisher, up_with_dashboard

from workspace_support import WorkspacePaths

WAIT = 15_000

REDRAW = """() => {
  const tbody = document.querySelector('#jobs tbody');
  tbody.replaceChildren(...[...tbody.children].map((tr) => tr.cloneNode(true)));
}"""
"""The table's rows replaced by copies, as a redraw replaces them (the copies carry no listeners)."""


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_a_press_opens_the_row_though_the_table_was_redrawn_meanwhile(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await page.goto(page_url)
        await pub.submit(prompt="press me", agent="mock", job_id="pressed", wait=True)
        row = page.locator('#jobs tbody tr[data-job-id="pressed"]')
        await expect(row).to_be_visible(timeout=WAIT)

        copy = row.locator("button[data-copy]").first
        await row.hover()  # the copy buttons show on hover
        await copy.click()
        await expect(copy).to_have_attribute("data-copied", "yes", timeout=WAIT)
        assert await page.locator("#detail-id").text_content() in (None, ""), "a copy button opened the row"

        box = await row.locator("td.prompt").bounding_box()
        assert box is not None
        await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await page.mouse.down()
        await page.evaluate(REDRAW)
        await page.mouse.up()
        await expect(page.locator("#detail-id")).to_have_text("pressed", timeout=WAIT)
