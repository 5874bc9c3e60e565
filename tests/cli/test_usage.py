"""`mam usage` and the COST column: totals of what agents reported, by agent, session and delegation tree."""

from __future__ import annotations

import json

import pytest
from msgspec.structs import replace
from runner_support import submit

from mam.contract import events as ev
from mam.contract.record import JobRecord, Status, encode_record
from mam.contract.usage import by_key, by_tree, group, money, total

from brokers import free_port
from e2e import up_process, workspace_id
from support import mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


def job(
    job_id: str,
    *,
    parent: str | None = None,
    agent: str = "claude-code",
    session: str | None = None,
    usage: ev.Usage | None = None,
    at: str = "2026-01-01T00:00:00Z",
) -> JobRecord:
    record = JobRecord(
        job_id=job_id,
        workspace="w",
        status=Status.SUCCEEDED,
        agent=agent,
        agent_session=session,
        prompt="p",
        parent=parent,
        submitted_at=at,
        updated_at=at,
    )
    return replace(record, usage=usage) if usage is not None else record


@pytest.mark.fast
def test_totals_add_what_was_reported_and_count_jobs_that_reported_nothing() -> None:
    sums = total(
        [
            job("a", usage=ev.Usage(cost_usd=0.5, input_tokens=10, turns=2)),
            job("b", usage=ev.Usage(input_tokens=5, output_tokens=7, agent_session_id="s")),
            job("c"),
        ]
    )
    assert sums.as_dict() == {
        "jobs": 3,
        "jobs_reporting_usage": 2,
        "cost_usd": 0.5,
        "input_tokens": 15,
        "cached_input_tokens": None,
        "output_tokens": 7,
        "turns": 2,
    }
    assert total([job("d", usage=ev.Usage(input_tokens=1))]).cost_usd is None, "no cost reported is not $0"


@pytest.mark.fast
def test_by_agent_and_by_session_put_the_costliest_first() -> None:
    records = [
        job("a", agent="codex", session="s1", usage=ev.Usage(input_tokens=100)),
        job("b", agent="claude-code", session="s1", usage=ev.Usage(cost_usd=0.25)),
        job("c", agent="claude-code", usage=ev.Usage(cost_usd=0.5)),
    ]
    assert [(g.key, g.totals.jobs, g.totals.cost_usd) for g in by_key(records, lambda r: r.agent)] == [
        ("claude-code", 2, 0.75),
        ("codex", 1, None),
    ]
    assert [(g.key, g.totals.jobs) for g in group(records, "session")] == [("-", 1), ("s1", 2)]


@pytest.mark.fast
def test_a_trees_root_totals_all_its_descendants_and_each_job_that_delegated_its_own_subtree() -> None:
    records = [
        job("root", usage=ev.Usage(cost_usd=1.0), at="2026-01-01T00:00:00Z"),
        job("mid", parent="root", usage=ev.Usage(cost_usd=0.5, input_tokens=10), at="2026-01-01T00:00:01Z"),
        job("leaf1", parent="mid", usage=ev.Usage(cost_usd=0.25), at="2026-01-01T00:00:02Z"),
        job("leaf2", parent="root", usage=ev.Usage(input_tokens=5), at="2026-01-01T00:00:03Z"),
        job("alone", at="2026-01-01T00:00:04Z"),
        job("orphan", parent="gone", usage=ev.Usage(cost_usd=2.0), at="2026-01-01T00:00:05Z"),
    ]
    rows = [(g.key, g.depth, g.totals.jobs, g.totals.cost_usd, g.totals.input_tokens) for g in by_tree(records)]
    assert rows == [
        ("root", 0, 4, 1.75, 15),
        ("mid", 1, 2, 0.75, 10),
        ("alone", 0, 1, None, None),
        ("orphan", 0, 1, 2.0, None),
    ]


@pytest.mark.fast
def test_a_cycle_of_parents_counts_each_job_once() -> None:
    rows = by_tree(
        [
            job("a", parent="b", usage=ev.Usage(cost_usd=1.0)),
            job("b", parent="a", usage=ev.Usage(cost_usd=2.0), at="2026-01-01T00:00:01Z"),
        ]
    )
    assert [(g.key, g.totals.jobs, g.totals.cost_usd) for g in rows] == [("a", 2, 3.0)]


@pytest.mark.fast
@pytest.mark.parametrize(("cost", "shown"), [(None, "-"), (0.0123, "$0.0123"), (0.0, "$0.0000"), (1234.5, "$1,234.50")])
def test_money_reads_like_money(cost: float | None, shown: str) -> None:
    assert money(cost) == shown


# --- over a real mam up: reported usage in the records, then `mam usage` and `mam jobs` ------------------

TREE = [
    # job id, parent, agent, session, usage
    ("root", None, "claude-code", "s1", {"cost_usd": 1.5, "input_tokens": 1000, "output_tokens": 100, "turns": 3}),
    ("child-a", "root", "codex", "s1", {"input_tokens": 500, "cached_input_tokens": 400, "output_tokens": 50}),
    ("grandchild", "child-a", "claude-code", None, {"cost_usd": 0.25, "input_tokens": 10}),
    ("child-b", "root", "gemini", None, None),
    ("lone", None, "claude-code", "s2", {"cost_usd": 0.125}),
]


async def finish(url: str, ws: WorkspacePaths, job_id: str, usage: dict | None) -> None:
    """What a runner publishes for a job whose agent reported `usage`: claimed, started, then succeeded."""
    topic = f"mam/{workspace_id(ws.root)}/jobs/{job_id}/events"
    await publish(url, topic, json.dumps({"type": "claimed", "id": f"{job_id}-0", "runner": "r1"}).encode())
    await publish(url, topic, json.dumps({"type": "started", "id": f"{job_id}-1", "runner": "r1"}).encode())
    done = {"type": "succeeded", "id": f"{job_id}-2", "result": "ok"} | ({"usage": usage} if usage else {})
    await publish(url, topic, json.dumps(done).encode())


async def test_mam_usage_totals_by_agent_session_and_tree_and_mam_jobs_shows_cost(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        for job_id, parent, agent, session, usage in TREE:
            extra = [*(["--parent", parent] if parent else []), *(["--agent-session", session] if session else [])]
            await submit(url, ws, job_id, "do it", *extra, agent=agent)
            await finish(url, ws, job_id, usage)
        for job_id, *_ in TREE:
            await wait_for_state(url, workspace_id(ws.root), job_id, lambda r: r["status"] == "succeeded", timeout=20)

    async def usage(*args: str) -> dict:
        result = await run(mam("usage", "--json", "--workspace", str(ws.root), *args), cwd=ws.elsewhere)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    by_agent = await usage()
    assert [(g["key"], g["jobs"], g["cost_usd"]) for g in by_agent["groups"]] == [
        ("claude-code", 3, 1.875),
        ("codex", 1, None),
        ("gemini", 1, None),
    ]
    assert by_agent["total"] == {
        "jobs": 5,
        "jobs_reporting_usage": 4,
        "cost_usd": 1.875,
        "input_tokens": 1510,
        "cached_input_tokens": 400,
        "output_tokens": 150,
        "turns": 3,
    }
    by_tree = await usage("--by", "parent")
    assert [(g["key"], g["depth"], g["jobs"], g["cost_usd"], g["input_tokens"]) for g in by_tree["groups"]] == [
        ("root", 0, 4, 1.75, 1510),
        ("child-a", 1, 2, 0.25, 510),
        ("lone", 0, 1, 0.125, None),
    ]
    by_session = await usage("--by", "session")
    assert {g["key"]: g["jobs"] for g in by_session["groups"]} == {"s1": 2, "s2": 1, "-": 2}
    recent = await usage("--since", "1h")
    assert recent["total"]["jobs"] == 5

    table = await run(mam("usage", "--by", "parent", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    lines = table.stdout.decode().splitlines()
    assert lines[0].split() == [
        "JOB",
        "(ITS",
        "TREE)",
        "JOBS",
        "REPORTED",
        "COST",
        "INPUT",
        "CACHED",
        "OUTPUT",
        "TURNS",
    ]
    assert lines[1].split() == ["root", "4", "3", "$1.75", "1,510", "400", "150", "3"]
    assert lines[2].split()[:4] == ["child-a", "2", "2", "$0.2500"] and lines[2].startswith("  child-a")
    assert lines[-1].split()[:4] == ["TOTAL", "5", "4", "$1.88"]

    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    rows = jobs.stdout.decode().splitlines()
    assert rows[0].split()[:7] == ["JOB", "STATUS", "AGENT", "SESSION", "AGE", "DURATION", "COST"]
    cost_at = rows[0].index("COST")
    costs = {row.split()[0]: row[cost_at:].split()[0] for row in rows[1:]}
    assert costs == {"root": "$1.50", "child-a": "-", "grandchild": "$0.2500", "child-b": "-", "lone": "$0.1250"}
    listed = await run(mam("jobs", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    by_id = {r["job_id"]: r for r in json.loads(listed.stdout)}
    assert by_id["root"]["usage"] == TREE[0][4] and "usage" not in by_id["child-b"], "records as they are"


async def test_mam_usage_refuses_a_bad_since_and_says_when_there_is_nothing(ws: WorkspacePaths) -> None:
    bad = await run(mam("usage", "--since", "lately", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert bad.returncode == 2 and b"--since: 'lately' is neither a duration" in bad.stderr
    empty = await run(mam("usage", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert empty.returncode == 0 and empty.stdout == b"" and b"no jobs in" in empty.stderr
    jobs = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert b"COST" not in jobs.stdout


async def test_the_dashboard_shows_a_jobs_reported_cost_as_it_arrives(ws: WorkspacePaths) -> None:
    from dashboard_support import browser_page, up_with_dashboard
    from playwright.async_api import expect

    async with up_with_dashboard(ws) as (url, page_url), browser_page() as page:
        await page.goto(page_url)
        await expect(page.locator("#projector")).to_contain_text("projector online", timeout=15_000)
        await submit(url, ws, "priced", "do it", agent="claude-code")
        await submit(url, ws, "unpriced", "do it", agent="codex")
        cost = page.locator('#jobs tbody tr[data-job-id="priced"] .cost')
        await expect(cost).to_have_text("", timeout=15_000)
        await finish(url, ws, "priced", {"cost_usd": 0.0123, "input_tokens": 2312, "turns": 3})
        await finish(url, ws, "unpriced", {"input_tokens": 7})
        await expect(cost).to_have_text("$0.0123", timeout=15_000)
        assert await cost.get_attribute("title") == "input_tokens 2312, turns 3"
        await expect(page.locator('#jobs tbody tr[data-job-id="unpriced"] .status')).to_have_text("succeeded")
        assert await page.locator('#jobs tbody tr[data-job-id="unpriced"] .cost').text_content() == ""


@pytest.mark.fast
def test_usage_is_the_record_key_after_the_older_ones_and_absent_when_nothing_was_reported() -> None:
    fields = JobRecord.__struct_fields__
    assert fields.index("usage") == fields.index("waited") + 1, "keys are added, never moved"
    assert b'"usage"' not in encode_record(job("plain"))
    reported = encode_record(job("x", usage=ev.Usage(cost_usd=0.5, agent_session_id="s")))
    assert (
        reported.endswith(b',"usage":{"cost_usd":0.5,"agent_session_id":"s"}}\n')
        or b'"usage":{"cost_usd":0.5,"agent_session_id":"s"}' in reported
    )
