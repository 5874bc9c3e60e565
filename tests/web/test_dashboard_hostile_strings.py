"""The dashboard shows what clients chose with its control characters and bidi overrides escaped.

A prompt, a label, a runner's host, a refused event's topic and the reason quoting its payload are a
client's; the page shows each as `mam show` does (`\\x1b`, `\\u202e`: web/static/dom.js `visible`), so
U+202E cannot reverse the text after it and no control character is hidden in it. In Chromium, driven
by Playwright, against `mam up --dashboard`; the strings are generated (hypothesis).
"""

from __future__ import annotations

import json

from dashboard_support import browser_page, publisher, up_with_dashboard
from hostile_strings_support import FORGED, generated, hostile, raw_in

from mam.contract.terminal import safe
from mam.contract.timefmt import utc_now_iso
from mam.contract.topics import Topics

from e2e import workspace_id
from support import publish
from workspace_support import WorkspacePaths

WAIT = 15_000
SHOWN_TEXT = """() => [document.body.textContent,
  ...[...document.querySelectorAll("[title]")].map((node) => node.getAttribute("title"))].join("\\n")"""
"""Everything the page shows: its text, and the tooltips."""


async def test_the_page_shows_client_chosen_strings_escaped(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    texts = [FORGED, *generated(45, 5, hostile())]
    topics = Topics(workspace_id(ws.root))
    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        await pub.submit(
            prompt=f"fix {texts[0]} the tests", agent="nobody", job_id="web-bidi", labels={"team": texts[1]}, wait=True
        )
        status = {
            "status": "online",
            "agent": "nobody",
            "agent_id": "r-bidi",
            "epoch": "e1",
            "pid": 1,
            "host": texts[2],
            "started_at": utc_now_iso(),
        }
        await publish(url, topics.agent_status("r-bidi"), json.dumps(status).encode(), retain=True)
        await page.goto(page_url)
        for n, text in enumerate(texts):
            await publish(url, f"{topics.prefix}/jobs/{text}/events", b'{"type":"submitted","prompt":"p","agent":"a"}')
            await publish(url, topics.events(f"web-refused-{n}"), json.dumps({"type": text}).encode())
        await expect(page.locator("#refusals")).to_contain_text(f"web-refused-{len(texts) - 1}", timeout=WAIT)
        await expect(page.locator('#agents tr[data-agent-id="r-bidi"]')).to_contain_text(
            safe(texts[2]).strip(), timeout=WAIT
        )
        await page.locator('#jobs tbody tr[data-job-id="web-bidi"]').click()
        await expect(page.locator("#record")).to_contain_text("\\u202eexe.txt", timeout=WAIT)
        shown = await page.evaluate(SHOWN_TEXT)
    assert raw_in(shown) <= {"\t"}, sorted(raw_in(shown))
    assert "\\x1b[2J" in shown and safe(texts[1]) in shown
    for text in texts:
        assert f"Invalid value '{safe(text)}'" in shown, text
