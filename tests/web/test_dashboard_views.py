"""The dashboard's views in a real browser (Debian's headless Chromium, driven by Playwright): the layout at
two widths, live output (tail, ANSI colours), filters, search and paging, the delegation tree, the timeline,
the charts, and the retry, cancel-tree and submit actions.

Waits are Playwright's `expect` or `wait_for_function` with timeouts, never sleeps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agent_clis import CLIS
from dashboard_support import browser_page, publisher, save_screenshot, up_with_dashboard
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_runner
from runner_support import agent_runner, mock_command

from mam.contract.record import Status

from e2e import workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

WAIT = 15_000
# The wide screen runs with -m slow; the 1280x900 one by default.
WIDTHS = [pytest.param((1280, 900), id="1280x900"), pytest.param((1920, 1080), id="1920x1080", marks=pytest.mark.slow)]
FITS = "(s) => { const card = document.querySelector(s); return [card.scrollWidth, card.clientWidth]; }"


def row(page, job_id: str):  # noqa: ANN001, ANN201 - playwright's Page and Locator
    return page.locator(f'#jobs tbody tr[data-job-id="{job_id}"]')


def page_errors(page) -> list[str]:  # noqa: ANN001 - playwright's Page
    """The page's uncaught script errors and console errors (a refused request, a content security policy
    violation), collected as they happen (a test asserts there were none)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    return errors


async def fits(page, selector: str) -> None:  # noqa: ANN001 - playwright's Page
    scroll, client = await page.evaluate(FITS, selector)
    assert scroll <= client, f"{selector} overflows: scrollWidth {scroll} > clientWidth {client}"


@pytest.mark.parametrize("viewport", WIDTHS)
async def test_the_table_fits_its_card_with_and_without_a_job_open(
    ws: WorkspacePaths, tmp_path: Path, viewport: tuple[int, int]
) -> None:
    from playwright.async_api import expect

    long_word = "x" * 300
    labels = {f"label-{i}": "a-rather-long-value-" + "v" * 30 for i in range(4)}
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page(viewport=viewport) as page,
    ):
        await pub.submit(
            prompt=long_word, agent="an-agent-with-a-long-name", job_id="parent-" + "p" * 60, labels=labels, wait=True
        )
        await pub.submit(
            prompt="a child " + long_word,
            agent="nobody",
            job_id="child-" + "c" * 60,
            parent="parent-" + "p" * 60,
            labels=labels,
            wait=True,
        )
        async with agent_runner(url, ws, *mock_command(), name="r-layout"):
            await pub.submit(prompt="stream 5", agent="mock", job_id="layout-done", wait=True)
            await wait_for_state(url, workspace_id(ws.root), "layout-done", lambda r: r["status"] == "succeeded")
        await page.goto(page_url)
        await expect(page.locator("#jobs tbody tr")).to_have_count(3, timeout=WAIT)
        await expect(page.locator("#range")).to_have_text("1-3 of 3")
        await fits(page, "#list")
        await fits(page, "html")
        headers = await page.locator("#jobs thead th").all_text_contents()
        assert headers == [
            "job",
            "status",
            "agent",
            "runner",
            "labels",
            "submitted",
            "duration",
            "exit",
            "att.",
            "parent",
            "cost",
            "prompt",
        ]
        await expect(row(page, "layout-done").locator("td").nth(3)).to_have_text("r-layout")  # its runner

        await row(page, "layout-done").click()
        await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=WAIT)
        await expect(page.locator("#events tbody tr").last).to_contain_text("succeeded", timeout=WAIT)
        await fits(page, "#list")
        await fits(page, "#detail")
        await fits(page, "html")
        # Event types never wrap: each type cell's text lies on one line.
        lines = await page.evaluate("""() => [...document.querySelectorAll('#events td.type')].map((td) => {
            const range = document.createRange(); range.selectNodeContents(td); return range.getClientRects().length; })""")
        assert lines and set(lines) == {1}, lines
        # Times say how long ago, and the local time on hover.
        submitted = row(page, "layout-done").locator("td.when")
        assert (await submitted.text_content()).endswith("ago") or await submitted.text_content() == "just now"
        assert await submitted.get_attribute("title")
        shot = tmp_path / f"dashboard-{viewport[0]}.png"
        await page.screenshot(path=str(shot))
        save_screenshot(shot)


ANSI_SCRIPT = r"""for i in $(seq 1 150); do printf '\033[31mred %s\033[0m plain \033[1;94mbright\033[0m\n' "$i"; sleep 0.04; done"""


@pytest.mark.slow
async def test_live_output_follows_the_tail_in_colour_and_stays_put_when_scrolled_up(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page() as page,
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="r-shell"),
    ):
        errors = page_errors(page)
        await page.goto(page_url)
        await pub.submit(prompt=ANSI_SCRIPT, agent="shell", job_id="colours", wait=True)
        await row(page, "colours").click()
        output = page.locator("#output")
        await expect(output).to_contain_text("red 40 plain bright", timeout=WAIT)
        # While it prints, the newest line is in view: the pane sits at its end.
        at_end = (
            "() => { const o = document.querySelector('#output'); "
            "return o.scrollHeight > o.clientHeight && o.scrollTop + o.clientHeight >= o.scrollHeight - 8; }"
        )
        await page.wait_for_function(at_end, timeout=WAIT)
        assert await page.locator("#detail-status").text_content() == "running"
        # Coloured spans, no escape characters or raw SGR codes in the text.
        red = output.locator("span.ansi-fg-1").first
        assert await red.evaluate("(s) => getComputedStyle(s).color") == "rgb(229, 57, 53)"
        bright = output.locator("span.ansi-fg-12.ansi-bold").first
        assert await bright.evaluate("(s) => [getComputedStyle(s).color, getComputedStyle(s).fontWeight]") == [
            "rgb(130, 177, 255)",
            "700",
        ]
        text = await output.text_content()
        assert "\x1b" not in text and "[31m" not in text and "[0m" not in text

        # Scrolled up, the pane stays where the reader put it while lines keep coming; a control jumps back.
        await output.evaluate("(o) => { o.scrollTop = 0; }")
        await expect(page.locator("#jump")).to_be_visible(timeout=WAIT)
        seen = len(await output.text_content())
        await page.wait_for_function(
            f"() => document.querySelector('#output').textContent.length > {seen + 500}", timeout=WAIT
        )
        assert await output.evaluate("(o) => o.scrollTop") == 0
        await page.locator("#jump").click()
        await expect(page.locator("#jump")).to_be_hidden()
        await page.wait_for_function(at_end, timeout=WAIT)
        await expect(output).to_contain_text("red 150 plain bright", timeout=WAIT)
        await page.wait_for_function(at_end, timeout=WAIT)  # and it followed to the very last line
        assert errors == []


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_every_status_is_a_filter_and_search_time_range_and_paging_show_a_total(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        for i in range(60):
            labels = {"team": "red"} if i % 20 == 0 else {"team": "blue"}
            await pub.submit(
                prompt=f"task number {i:02d}", agent="nobody", job_id=f"page-{i:02d}", labels=labels, wait=i == 59
            )
        errors = page_errors(page)
        await page.goto(page_url)
        options = await page.locator("#filters select[name=status] option").all_text_contents()
        assert set(options) == {"any"} | {s.value for s in Status}, options

        await expect(page.locator("#range")).to_have_text("1-50 of 60", timeout=WAIT)
        await expect(page.locator("#jobs tbody tr")).to_have_count(50)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "page-59")
        await expect(page.locator("#prev")).to_be_disabled()
        await page.locator("#next").click()
        await expect(page.locator("#range")).to_have_text("51-60 of 60", timeout=WAIT)
        await expect(page.locator("#jobs tbody tr")).to_have_count(10)
        await expect(page.locator("#jobs tbody tr").last).to_have_attribute("data-job-id", "page-00")
        await expect(page.locator("#next")).to_be_disabled()
        await page.locator("#prev").click()
        await expect(page.locator("#range")).to_have_text("1-50 of 60", timeout=WAIT)
        # A header sorts: "submitted" is newest first; a click makes it oldest first, another click back.
        submitted = page.locator('#jobs th[data-sort="submitted"]')
        await expect(submitted).to_have_attribute("aria-sort", "descending")
        await submitted.click()
        await expect(submitted).to_have_attribute("aria-sort", "ascending")
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "page-00", timeout=WAIT)
        await submitted.click()
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "page-59", timeout=WAIT)

        filters = page.locator("#filters")
        await filters.locator("input[name=q]").fill("number 42")  # the prompt
        await filters.locator("button").click()
        await expect(page.locator("#range")).to_have_text("1-1 of 1", timeout=WAIT)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "page-42")
        await filters.locator("input[name=q]").fill("RED")  # a label value, in any case
        await filters.locator("button").click()
        await expect(page.locator("#range")).to_have_text("1-3 of 3", timeout=WAIT)
        await filters.locator("input[name=q]").fill("")
        await filters.locator("input[name=since]").fill("2000-01-01T00:00")
        await filters.locator("input[name=until]").fill("2000-01-02T00:00")
        await filters.locator("button").click()
        await expect(page.locator("#range")).to_have_text("no jobs match", timeout=WAIT)
        await expect(page.locator("#jobs tbody tr")).to_have_count(0)
        await filters.locator("input[name=until]").fill("")
        await filters.locator("button").click()
        await expect(page.locator("#range")).to_have_text("1-50 of 60", timeout=WAIT)
        await filters.locator("select[name=status]").select_option("blocked")
        await expect(page.locator("#range")).to_have_text("no jobs match", timeout=WAIT)
        await filters.locator("select[name=status]").select_option("submitted")
        await expect(page.locator("#range")).to_have_text("1-50 of 60", timeout=WAIT)
        # A job submitted now arrives over the stream, and the page's total counts it.
        await pub.submit(prompt="one more", agent="nobody", job_id="page-60", wait=True)
        await expect(page.locator("#range")).to_have_text("1-50 of 61", timeout=WAIT)
        await expect(page.locator("#jobs tbody tr").first).to_have_attribute("data-job-id", "page-60")
        assert errors == []


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_the_tree_shows_a_job_and_its_subtree_and_cancel_tree_asks_and_records_the_reason(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page() as page,
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="r-tree"),
    ):
        await pub.submit(prompt="echo planning; sleep 60", agent="shell", job_id="tree-root", wait=True)
        await pub.submit(prompt="child one", agent="nobody", job_id="tree-a", parent="tree-root", wait=True)
        await pub.submit(prompt="child two", agent="nobody", job_id="tree-b", parent="tree-root", wait=True)
        await pub.submit(prompt="grandchild", agent="nobody", job_id="tree-a1", parent="tree-a", wait=True)
        await wait_for_state(url, ws_id, "tree-root", lambda r: r["status"] == "running")
        await page.goto(page_url + "?job=tree-a1")

        tree = page.locator("#tree ul.tree")
        await expect(tree.locator("li")).to_have_count(4, timeout=WAIT)
        root = tree.locator(':scope > li[data-job-id="tree-root"]')
        await expect(root.locator(":scope > ul > li")).to_have_count(2)
        await expect(root.locator('li[data-job-id="tree-a"] > ul > li[data-job-id="tree-a1"]')).to_have_count(1)
        await expect(root.locator(".status").first).to_have_text("running")
        await expect(tree.locator('li[data-job-id="tree-a1"] .node')).to_have_class("node selected")
        await root.locator('li[data-job-id="tree-a"] > .node button.fold').click()  # folds its subtree
        await expect(tree.locator('li[data-job-id="tree-a1"]')).to_have_count(0)
        await root.locator('li[data-job-id="tree-a"] > .node button.fold').click()
        await expect(tree.locator('li[data-job-id="tree-a1"]')).to_have_count(1)

        await tree.locator('a[data-open="tree-root"]').click()
        await expect(page.locator("#detail-id")).to_have_text("tree-root", timeout=WAIT)
        await expect(page.locator("#output")).to_contain_text("planning", timeout=WAIT)
        await expect(tree.locator("li")).to_have_count(4, timeout=WAIT)
        await expect(tree.locator('li[data-job-id="tree-root"] > .node')).to_have_class("node selected")
        # The timeline draws a mark per event, and the phases it went through. The running job's
        # heartbeats keep adding events, so both are counted in one turn of the page (reading one count
        # and then waiting for the other to match failed whenever a heartbeat landed in between).
        await page.wait_for_function(
            """() => { const rows = document.querySelectorAll('#events tbody tr').length;
                       return rows >= 3 && rows === document.querySelectorAll('#timeline .event').length; }""",
            timeout=WAIT,
        )
        for kind in ("submitted", "claimed", "started"):
            await expect(page.locator(f'#timeline .event[data-type="{kind}"]')).to_have_count(1)
        await expect(page.locator('#timeline rect[data-phase="running"]')).to_have_count(1)
        shot = tmp_path / "dashboard-tree.png"
        await page.screenshot(path=str(shot))
        save_screenshot(shot)

        # Cancel tree asks first; "keep it" leaves the job running.
        await page.locator("#cancel-tree").click()
        await expect(page.locator("#cancel-form")).to_be_visible()
        assert await page.locator("#cancel-form input[name=tree]").is_checked()
        await page.locator("#keep").click()
        await expect(page.locator("#cancel-form")).to_be_hidden()
        await page.locator("#cancel-tree").click()
        await page.locator("#cancel-form input[name=reason]").fill("wrong plan")
        await page.locator("#confirm-cancel").click()
        await expect(page.locator("#verdict")).to_contain_text(
            "cancel of the tree requested: tree-root (was running; it ends once its runner stops it)", timeout=WAIT
        )
        for job_id in ("tree-root", "tree-a", "tree-b", "tree-a1"):
            await expect(tree.locator(f'li[data-job-id="{job_id}"] .status').first).to_have_text(
                "cancelled", timeout=WAIT
            )
        record = await wait_for_state(url, ws_id, "tree-root", lambda r: r["status"] == "cancelled")
        assert record["cancel_reason"] == "wrong plan" and record.get("cancel_tree") is True, record
        child = await wait_for_state(url, ws_id, "tree-a1", lambda r: r["status"] == "cancelled")
        assert "tree-root" in child["cancel_reason"], child
        await expect(page.locator("#events")).to_contain_text("cancel_requested", timeout=WAIT)
        await expect(page.locator("#events")).to_contain_text("wrong plan")


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_retry_a_failed_job_and_submit_one_from_the_form(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page() as page,
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="r-retry"),
    ):
        await page.goto(page_url)
        await pub.submit(prompt="echo trying; exit 3", agent="shell", job_id="will-fail", labels={"k": "v"}, wait=True)
        await expect(row(page, "will-fail").locator(".status")).to_have_text("failed", timeout=WAIT)
        await expect(row(page, "will-fail").locator("td").nth(7)).to_have_text("3", timeout=WAIT)  # exit code
        await row(page, "will-fail").click()
        await expect(page.locator("#retry")).to_be_visible(timeout=WAIT)
        await expect(page.locator("#cancel")).to_be_hidden()
        await page.locator("#retry").click()
        await expect(page.locator("#verdict")).to_contain_text("retry recorded: ", timeout=WAIT)
        verdict = await page.locator("#verdict").text_content()
        new_id = verdict.split("retry recorded: ")[1].split()[0]
        assert new_id != "will-fail"
        again = await wait_for_state(url, ws_id, new_id, lambda r: r["status"] == "failed")
        assert again["retry_of"] == "will-fail" and again["labels"] == {"k": "v"}, again

        # A job with a retry policy: its timeline draws each attempt's queued and running phases.
        await pub.submit(prompt="exit 1", agent="shell", job_id="two-tries", retries=1, backoff=0, wait=True)
        await wait_for_state(url, ws_id, "two-tries", lambda r: r["status"] == "failed" and r.get("attempt") == 2)
        await row(page, "two-tries").click()
        await expect(page.locator('#timeline .event[data-type="retrying"]')).to_have_count(1, timeout=WAIT)
        await expect(page.locator('#timeline rect[data-phase="running"]')).to_have_count(2)
        await expect(page.locator('#timeline rect[data-phase="queued"]')).to_have_count(2)
        titles = await page.locator('#timeline rect[data-phase="running"] title').all_text_contents()
        assert [t.split(" from ")[0] for t in titles] == ["running (attempt 1)", "running (attempt 2)"], titles

        # The submit form: agent, prompt, labels; the new job opens.
        await page.locator("#new-job").click()
        form = page.locator("#submit-form")
        await form.locator("input[name=agent]").fill("shell")
        await form.locator("textarea[name=prompt]").fill("echo from the form")
        await form.locator("input[name=labels]").fill("bad")
        await form.locator("#send-job").click()
        await expect(page.locator("#submit-verdict")).to_have_text('label "bad" is not key=value')
        await form.locator("input[name=labels]").fill("team=ui, kind=demo")
        await form.locator("#send-job").click()
        await expect(page.locator("#submit-verdict")).to_contain_text("submitted ", timeout=WAIT)
        await expect(page.locator("#output")).to_contain_text("from the form", timeout=WAIT)
        await expect(page.locator("#detail-status")).to_have_text("succeeded", timeout=WAIT)
        job_id = await page.locator("#detail-id").text_content()
        record = await wait_for_state(url, ws_id, job_id, lambda r: r["status"] == "succeeded")
        assert record["labels"] == {"team": "ui", "kind": "demo"} and record["agent"] == "shell"


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_charts_draw_finished_jobs_queue_depth_and_cost_per_agent(ws: WorkspacePaths, tmp_path: Path) -> None:
    from playwright.async_api import expect

    ws_id = workspace_id(ws.root)
    async with up_with_dashboard(ws) as (url, page_url), publisher(url, ws) as pub, browser_page() as page:
        errors = page_errors(page)
        await page.goto(page_url)
        await pub.submit(prompt="nobody runs this", agent="nobody", job_id="chart-queued", wait=True)
        model = Script([Turn(text="hi"), Turn(text="hi"), Turn(text="hi"), Turn(status=400, error="bad request")])
        async with real_runner(CLIS["claude-code"], url, ws, model, name="r-claude"):  # 3 answers, 1 API error
            for i in range(3):
                await pub.submit(prompt=f"say hi {i}", agent="claude-code", job_id=f"chart-ok-{i}", wait=True)
            await pub.submit(prompt="fail please", agent="claude-code", job_id="chart-fail", wait=True)
            for job_id in ("chart-ok-0", "chart-ok-1", "chart-ok-2", "chart-fail"):
                await wait_for_state(
                    url, ws_id, job_id, lambda r: r["status"] in ("succeeded", "failed"), timeout=JOB_TIMEOUT
                )
            await expect(page.locator('#agents tr[data-agent-id="r-claude"]')).to_contain_text("idle", timeout=WAIT)
            last_seen = page.locator('#agents tr[data-agent-id="r-claude"] td').nth(5)
            await expect(last_seen).to_have_text(re.compile(r"just now|\d+ s ago"))
            assert await last_seen.get_attribute("title")  # the local time

        await page.locator("#chart-window").select_option("15m")  # 15-second buckets
        await expect(page.locator("#charts figcaption").first).to_have_text("jobs finished per 15 s", timeout=WAIT)
        bars = page.locator('#chart-finished rect.bar[data-series="succeeded"]')
        await expect(bars.first).to_be_attached(timeout=WAIT)
        heights = await bars.evaluate_all("(bars) => bars.map((b) => b.getBoundingClientRect().height)")
        assert heights and min(heights) > 0, heights
        await expect(page.locator('#chart-finished rect.bar[data-series="failed"]').first).to_be_attached()
        await expect(page.locator('#chart-queue polyline[data-series="queued"]')).to_have_count(1)
        cost = page.locator('#chart-cost polyline[data-series="claude-code"]')
        await expect(cost).to_have_count(1, timeout=WAIT)
        await expect(page.locator('#chart-cost circle[data-series="claude-code"]').first).to_be_attached()
        assert await page.locator("#chart-cost .legend").text_content() == "claude-code"
        shot = tmp_path / "dashboard-charts.png"
        await page.locator("#charts").screenshot(path=str(shot))
        save_screenshot(shot)
        assert errors == []


async def test_a_long_jobs_timeline_still_starts_where_it_was_submitted(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with (
        up_with_dashboard(ws) as (url, page_url),
        publisher(url, ws) as pub,
        browser_page() as page,
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="r-long"),
    ):
        errors = page_errors(page)
        # About 600 KB of output: more than the page of the log the detail opens with.
        await pub.submit(
            prompt="head -c 600000 /dev/zero | tr '\\0' x | fold -w 1000", agent="shell", job_id="long-log", wait=True
        )
        await wait_for_state(url, workspace_id(ws.root), "long-log", lambda r: r["status"] == "succeeded")
        await page.goto(page_url + "?job=long-log")
        await expect(page.locator("#earlier")).to_be_visible(timeout=WAIT)  # the log was cut
        assert await page.locator("#events tbody tr", has_text="submitted").count() == 0
        for kind in ("submitted", "claimed", "started", "succeeded"):
            await expect(page.locator(f'#timeline .event[data-type="{kind}"]')).to_have_count(1, timeout=WAIT)
        assert errors == []
