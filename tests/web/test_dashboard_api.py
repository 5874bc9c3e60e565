"""The dashboard's JSON API against a real `mam up --dashboard` with real runners, every response checked
against the OpenAPI description the dashboard serves (`/api/openapi.json`), and that description checked
against the OpenAPI 3.1 schema itself (`dashboard_api_support.Api`).

Reads: filters, search, time range, paging with a total, sort, a job's events and output by byte range
(stitched back, it is what `mam logs` prints), runners, usage, the charts' stats, and their memory under large
prompts and logs. Bad input: a 400 with a one-line error naming what was sent. Writes: test_dashboard_api_writes.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_clis import CLIS
from dashboard_api_support import Api, ids
from dashboard_server_support import dashboard, request
from dashboard_support import up_dashboard_process
from model_servers import Script, Turn
from real_agent_support import real_runner
from runner_support import agent_runner, submit

from support import DEAD_BROKER, mam, run
from workspace_support import WorkspacePaths


async def mam_ok(ws: WorkspacePaths, *args: str) -> str:
    result = await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


OUTPUT = "printf 'a%.0s' $(seq 1 70); echo; printf 'é€😀%.0s' 1 2 3; echo; echo second >&2; echo last"


@pytest.mark.slow
async def test_reads_filter_page_sort_and_describe_every_answer(ws: WorkspacePaths) -> None:
    async with (
        up_dashboard_process(ws) as (url, page, _),
        agent_runner(url, ws, name="sh1", agent="shell"),
        real_runner(CLIS["claude-code"], url, ws, Script([Turn(text="hi")]), name="cc1"),
    ):
        api = await Api.of(page)
        await submit(url, ws, "out1", OUTPUT, "--label", "team=web", agent="shell")
        await submit(url, ws, "fail1", "echo failing; exit 3", "--label", "team=infra", agent="shell")
        await submit(url, ws, "ok1", "echo fine", "--label", "team=web", "--label", "tier=Gold", agent="shell")
        await submit(url, ws, "kid1", "echo child", "--parent", "ok1", agent="shell")
        await submit(url, ws, "grandkid1", "echo grandchild", "--parent", "kid1", agent="shell")
        await submit(url, ws, "cc1", "hello", agent="claude-code")
        await submit(url, ws, "queued1", "never claimed", agent="nobody")
        waited = await run(
            mam(
                "wait",
                "out1",
                "fail1",
                "ok1",
                "kid1",
                "grandkid1",
                "cc1",
                "--workspace",
                str(ws.root),
                "--broker",
                url,
                "--timeout",
                "60",
            ),
            cwd=ws.elsewhere,
        )
        assert waited.returncode == 1, waited.stderr  # fail1 failed, the others succeeded
        every = ["queued1", "cc1", "grandkid1", "kid1", "ok1", "fail1", "out1"]

        # Everything, newest first; then filters, as `mam jobs` has them.
        listed = await api.get("/api/jobs")
        assert (listed["total"], listed["offset"], listed["limit"], ids(listed)) == (7, 0, 50, every)
        row = next(r for r in listed["jobs"] if r["job_id"] == "fail1")
        assert (row["status"], row["exit_code"], row["runner"], row["attempt"], row["labels"]) == (
            "failed",
            3,
            "sh1",
            1,
            {"team": "infra"},
        )
        assert row["duration_s"] >= 0 and row["error"] and row["root"] == "fail1"
        cost = json.loads((ws.jobs / "cc1.json").read_text())["usage"]["cost_usd"]  # as Claude Code priced it
        assert cost > 0 and next(r for r in listed["jobs"] if r["job_id"] == "cc1")["cost_usd"] == pytest.approx(cost)
        assert ids(await api.get("/api/jobs?status=failed")) == ["fail1"]
        assert ids(await api.get("/api/jobs?status=failed&status=submitted")) == ["queued1", "fail1"]
        assert ids(await api.get("/api/jobs?status=failed,submitted")) == ["queued1", "fail1"]
        assert ids(await api.get("/api/jobs?agent=claude-code&agent=nobody")) == ["queued1", "cc1"]
        assert ids(await api.get("/api/jobs?label=team=web")) == ["ok1", "out1"]
        assert ids(await api.get("/api/jobs?label=team=web&label=tier=Gold")) == ["ok1"]
        assert ids(await api.get("/api/jobs?q=GOLD")) == ["ok1"]  # a label's value, any case
        assert ids(await api.get("/api/jobs?q=Team")) == ["ok1", "fail1", "out1"]  # a label's key
        assert ids(await api.get("/api/jobs?q=CHILD")) == ["grandkid1", "kid1"]  # the prompt
        assert ids(await api.get("/api/jobs?parent=ok1")) == ["kid1"]
        assert ids(await api.get("/api/jobs?root=ok1")) == ["grandkid1", "kid1", "ok1"]
        assert {r["root"] for r in (await api.get("/api/jobs?root=ok1"))["jobs"]} == {"ok1"}
        assert ids(await api.get("/api/jobs?since=1h")) == every
        future = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        assert (await api.get(f"/api/jobs?since={future}"))["total"] == 0
        assert (await api.get("/api/jobs?until=1h"))["total"] == 0
        middle = next(r for r in listed["jobs"] if r["job_id"] == "kid1")["submitted_at"]
        assert ids(await api.get(f"/api/jobs?until={middle}")) == ["kid1", "ok1", "fail1", "out1"]

        # Paging: the pages add up to the whole list, each with the same total.
        pages = [await api.get(f"/api/jobs?limit=3&offset={offset}") for offset in (0, 3, 6)]
        assert [p["total"] for p in pages] == [7, 7, 7] and sum((ids(p) for p in pages), []) == every
        assert ids(await api.get("/api/jobs?q=team&limit=1&offset=1")) == ["fail1"]
        assert (await api.get("/api/jobs?q=team&limit=1&offset=1"))["total"] == 3

        # Sort: mam jobs --sort-by's fields, ascending, or descending with -.
        assert ids(await api.get("/api/jobs?sort=submitted")) == every[::-1]
        by_agent = (await api.get("/api/jobs?sort=agent"))["jobs"]
        assert [r["agent"] for r in by_agent] == sorted(r["agent"] for r in by_agent)
        by_duration = [r["duration_s"] for r in (await api.get("/api/jobs?sort=-duration&status=succeeded"))["jobs"]]
        assert by_duration == sorted(by_duration, reverse=True)
        assert ids(await api.get("/api/jobs?sort=status&limit=2")) == ["fail1", "queued1"]  # A to Z
        assert ids(await api.get("/api/jobs?sort=-status&limit=2")) == ["cc1", "grandkid1"]  # newest first within

        # A job's events, a page at a time.
        first = await api.get("/api/jobs/fail1/events?limit=2")
        assert [e["seq"] for e in first["events"]] == [1, 2] and first["more"] and first["next_after_seq"] == 2
        assert first["events"][0]["event"]["type"] == "submitted"
        rest = await api.get("/api/jobs/fail1/events?after_seq=2")
        assert not rest["more"] and rest["events"][-1]["event"]["type"] == "failed"
        logged = json.loads(await mam_ok(ws, "events", "fail1", "--json"))
        assert [e["seq"] for e in first["events"] + rest["events"]] == [e["seq"] for e in logged]
        assert (await api.get("/api/jobs/ail1/events"))["job_id"] == "fail1"  # a suffix, as the CLI takes it

        # Its output by byte range: stitched back it is what `mam logs` prints, never a character cut.
        whole = await api.get("/api/jobs/out1/output")
        expected = (await run(mam("logs", "out1", "--workspace", str(ws.root)), cwd=ws.elsewhere)).stdout.decode()
        # mam logs prints the stderr line to its stderr; the API gives both streams as they were logged
        assert whole["text"].replace("second\n", "", 1) == expected and "second\n" in whole["text"]
        assert whole["eof"] and whole["total"] == len(whole["text"].encode()) == len(expected.encode()) + 7
        stitched, offset = "", 0
        while True:
            part = await api.get(f"/api/jobs/out1/output?offset={offset}&limit=5")
            assert "\ufffd" not in part["text"] and part["next_offset"] > offset or part["eof"]
            stitched += part["text"]
            offset = part["next_offset"]
            if part["eof"]:
                break
        assert stitched == whole["text"]
        inside = whole["text"].encode().index("é".encode()) + 1  # the second byte of é
        assert (await api.get(f"/api/jobs/out1/output?offset={inside}&limit=3"))["text"] == "€"
        emoji = whole["text"].encode().index("😀".encode())
        one = await api.get(f"/api/jobs/out1/output?offset={emoji}&limit=1")  # less than the character
        assert (one["text"], one["next_offset"]) == ("😀", emoji + 4)
        assert (await api.get("/api/jobs/out1/output?offset=100000"))["text"] == ""

        # The runners, usage and the charts.
        runners = {r["agent_id"]: r for r in (await api.get("/api/agents"))["runners"]}
        assert {k: (r["agent"], r["status"], r["busy"], r["capacity"]) for k, r in runners.items()} == {
            "sh1": ("shell", "online", 0, 1),
            "cc1": ("claude-code", "online", 0, 1),
        }
        usage = await api.get("/api/usage?since=1h")
        groups = {g["key"]: g for g in usage["groups"]}
        assert groups["claude-code"]["cost_usd"] == pytest.approx(cost) and groups["shell"]["jobs"] == 5
        assert usage["total"]["jobs"] == 7
        assert [g["key"] for g in (await api.get("/api/usage?by=parent"))["groups"]][:2] != []
        stats = await api.get("/api/stats?minutes=60&bucket=60")
        assert len(stats["finished"]) == len(stats["queue"]) == len(stats["cost"]) == 60
        finished = {o: sum(b[o] for b in stats["finished"]) for o in stats["outcomes"]}
        assert finished == {"succeeded": 5, "failed": 1, "cancelled": 0, "timed_out": 0, "lost": 0}
        assert stats["queue"][-1] == {"t": stats["queue"][-1]["t"], "queued": 1, "running": 0}
        assert sum(b.get("claude-code", 0) for b in stats["cost"]) == pytest.approx(cost)
        assert (await api.get("/api/stats?minutes=10080&bucket=1800"))["bucket_s"] == 1800

        # Bad input: 400, one line naming what was sent; a job that is not there: 404.
        await api.refused("/api/jobs?status=bogus", "bogus")
        await api.refused("/api/jobs?limit=501", "limit", "501")
        await api.refused("/api/jobs?limit=0", "limit")
        await api.refused("/api/jobs?offset=-1", "offset")
        await api.refused("/api/jobs?sort=size", "size")
        await api.refused("/api/jobs?stauts=failed", "stauts")
        await api.refused("/api/jobs?since=yesterday", "since", "yesterday")
        await api.refused("/api/jobs?label=team", "team")
        await api.refused("/api/jobs?root=a%20b", "a b")
        await api.refused("/api/jobs/out1/events?limit=many", "limit", "many")
        await api.refused("/api/jobs/out1/output?limit=2000000", "limit", "2000000")
        await api.refused("/api/stats?minutes=20000", "minutes", "20000")
        await api.refused("/api/stats?minutes=600&bucket=1", "500")
        await api.refused("/api/usage?by=team", "team")
        await api.refused("/api/jobs/nosuch/events", "nosuch", status=404)
        await api.refused("/api/jobs/nosuch/output", "nosuch", status=404)
        assert api.checked >= 60

        # A pruned job's events and output come from its archive.
        before = (await api.get("/api/jobs/fail1/events"))["events"]
        assert (await api.get("/api/jobs/fail1/output"))["text"] == "failing\n"
        await mam_ok(ws, "prune", "--older-than", "0s", "--status", "failed", "--broker", url)
        assert not (ws.logs / "fail1" / "events.jsonl").exists()
        archived = (await api.get("/api/jobs/fail1/events"))["events"]
        assert archived[: len(before)] == before and archived[-1]["event"]["type"] == "pruned"
        assert (await api.get("/api/jobs/fail1/output"))["text"] == "failing\n"
        indexed = {query: await api.get(query) for query in SAME_WITHOUT_INDEX}

    # The same answers without the query index (a scan of the registry, one record at a time).
    for name in (".index.sqlite", ".index.sqlite-wal", ".index.sqlite-shm"):
        (ws.jobs / name).unlink(missing_ok=True)
    async with dashboard(ws.root, DEAD_BROKER) as page:
        api = await Api.of(page)
        for query, answer in indexed.items():
            assert await api.get(query) == answer, query


SAME_WITHOUT_INDEX = (
    "/api/jobs",
    "/api/jobs?status=failed,submitted",
    "/api/jobs?agent=claude-code&agent=nobody",
    "/api/jobs?label=team=web&label=tier=Gold",
    "/api/jobs?q=team&limit=1&offset=1",
    "/api/jobs?root=ok1",
    "/api/jobs?parent=ok1",
    "/api/jobs?sort=submitted&limit=3&offset=2",
    "/api/jobs?sort=-status",
    "/api/jobs?sort=agent",
    "/api/jobs?sort=duration&status=failed,succeeded",
    "/api/jobs?since=1h&until=1m",
    "/api/usage?by=parent",
)


async def test_the_description_and_the_icon(ws: WorkspacePaths, tmp_path: Path) -> None:
    async with dashboard(ws.root, DEAD_BROKER) as page:
        api = await Api.of(page)
        for route in (
            "/api/jobs",
            "/api/jobs/{job_id}",
            "/api/jobs/{job_id}/events",
            "/api/jobs/{job_id}/output",
            "/api/agents",
            "/api/usage",
            "/api/stats",
            "/api/jobs/{job_id}/retry",
            "/api/jobs/{job_id}/cancel",
            "/api/jobs/{job_id}/log",
            "/api/jobs/{job_id}/answer",
            "/api/jobs/{job_id}/diff",
            "/api/jobs/{job_id}/merge",
            "/api/jobs/{job_id}/discard",
            "/api/stream",
        ):
            assert route in api.spec["paths"], route
        assert "post" in api.spec["paths"]["/api/jobs"]
        # A workspace with no jobs yet answers empty, as described.
        assert await api.get("/api/jobs") == {"total": 0, "offset": 0, "limit": 50, "jobs": []}
        assert (await api.get("/api/agents"))["runners"] == []
        assert sum(sum(b[o] for o in b if o != "t") for b in (await api.get("/api/stats"))["finished"]) == 0
        status, headers, body = await request(page, "GET", "/favicon.ico")
        assert status == 200 and headers["content-type"] == "image/x-icon"
        assert body[:4] == b"\x00\x00\x01\x00" and len(body) > 1000


KIB, MIB = 1024, 1024 * 1024


def rss(pid: int) -> int:
    """The process's resident memory in bytes (/proc/PID/status VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for {pid}")


async def test_reads_of_large_prompts_and_a_large_log_stay_within_a_memory_budget(ws: WorkspacePaths) -> None:
    """60 jobs of 500 KiB prompts (30 MB) and a 24 MB log, read by 16 clients at once: `mam up` holds a page's
    rows and one record or log line at a time, not the registry or the log."""
    from dashboard_support import publisher

    big = "x" * (500 * KIB - 1)
    chunk = "o" * (60 * KIB - 1) + "\n"
    lines = [
        {
            "seq": n + 1,
            "received_at": "2026-01-01T00:00:00Z",
            "event": {"type": "output", "id": f"o{n}", "v": 1, "seq": n, "stream": "stdout", "text": chunk},
        }
        for n in range(400)
    ]
    (ws.logs / "bigout").mkdir(parents=True)
    (ws.logs / "bigout" / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with up_dashboard_process(ws) as (url, page, daemon), publisher(url, ws) as pub:
        for i in range(60):
            await pub.submit(prompt=f"{i} needle{i % 3} {big}", agent="nobody", job_id=f"big-{i:02d}", wait=True)
        api = await Api.of(page)
        listed = await api.get("/api/jobs?limit=500")
        assert listed["total"] == 60 and all(r["prompt_truncated"] and len(r["prompt"]) == 200 for r in listed["jobs"])
        idle = peak = rss(daemon.pid)
        answers: list[Any] = []

        async def watch() -> None:
            nonlocal peak
            while True:  # a measurement, not a wait: the peak of the process's memory
                peak = max(peak, rss(daemon.pid))
                await anyio.sleep(0.01)

        async def one(path: str) -> None:
            answers.append((path, await api.get(path)))

        reads = [
            "/api/jobs?limit=500",
            "/api/jobs?q=NEEDLE2&limit=500",
            "/api/jobs?sort=-duration&limit=500",
            "/api/usage?by=parent",
            "/api/jobs/bigout/output?offset=5000000&limit=1048576",
            "/api/jobs/bigout/output?offset=20000000&limit=1048576",
            "/api/jobs/bigout/events?limit=5000",
            "/api/stats?minutes=10080&bucket=1800",
        ] * 2
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            async with anyio.create_task_group() as clients:
                for path in reads:
                    clients.start_soon(one, path)
            tg.cancel_scope.cancel()
        found = dict(answers)
        assert found["/api/jobs?q=NEEDLE2&limit=500"]["total"] == 20
        ranged = found["/api/jobs/bigout/output?offset=20000000&limit=1048576"]
        assert ranged["total"] == 400 * 60 * KIB and len(ranged["text"]) == MIB and set(ranged["text"]) == {"o", "\n"}
        events = found["/api/jobs/bigout/events?limit=5000"]
        assert events["more"] and 60 <= len(events["events"]) <= 80  # the page's 4 MiB budget
        budget = idle + 48 * MIB  # the page held whole: +62 MB here; a row at a time: +25 MB
        assert peak < budget, f"RSS {peak / MIB:.0f} MB reading, idle {idle / MIB:.0f} MB, budget {budget / MIB:.0f} MB"
        print(
            f"\n16 reads at once over 30 MB of prompts and a 24 MB log: mam up {idle / MIB:.0f} MB idle, "
            f"peak {peak / MIB:.0f} MB"
        )
