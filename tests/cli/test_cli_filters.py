"""`mam jobs` filters, newest first, ages; job ids by unique prefix or suffix (ambiguity: exit 2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from mam.agents import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.humanize import ago, parse_since, span
from mam.contract.record import JobRecord, Status
from mam.contract.workspace import resolve
from mam.registry.query import AmbiguousJob, JobFilter, NoSuchJob, parse_statuses, resolve_job_id

from brokers import RunningBroker
from e2e import event, projector_process, workspace_id
from support import mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _record(job_id: str, **fields: object) -> JobRecord:
    base: dict = {
        "job_id": job_id,
        "workspace": "w",
        "status": Status.SUBMITTED,
        "agent": "a",
        "prompt": "p",
        "submitted_at": "2026-05-01T11:00:00.000Z",
        "updated_at": "2026-05-01T11:00:00.000Z",
    }
    return JobRecord(**(base | fields))


@pytest.mark.fast
def test_spans_ages_and_since_read_like_people_write_them() -> None:
    assert [span(s) for s in (0, 42, 65, 600, 4320, 90000)] == ["0s", "42s", "1m05s", "10m", "1h12m", "1d1h"]
    assert ago("2026-05-01T11:57:00.000Z", NOW) == "3m ago" and ago(None, NOW) == "-"
    assert parse_since("30m", NOW) == NOW - timedelta(minutes=30)
    assert parse_since("1h30m", NOW) == NOW - timedelta(minutes=90)
    assert parse_since("2026-05-01T10:00:00Z", NOW) == datetime(2026, 5, 1, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="neither a duration"):
        parse_since("yesterday", NOW)


@pytest.mark.fast
def test_filter_parts_must_all_match() -> None:
    job = _record(
        "j", status=Status.RUNNING, agent="codex", agent_session="s1", labels={"team": "core", "x": "1"}, parent="root"
    )
    assert JobFilter().matches(job)
    assert JobFilter(
        statuses=parse_statuses(["failed,running"]),
        agent="codex",
        session="s1",
        labels={"team": "core"},
        parent="root",
        since=NOW - timedelta(hours=2),
    ).matches(job)
    assert not JobFilter(labels={"team": "core", "x": "2"}).matches(job)
    assert not JobFilter(since=NOW - timedelta(minutes=30)).matches(job)
    assert not JobFilter(agent="codex", session="other").matches(job)
    with pytest.raises(ValueError, match="'nope' is not a status"):
        parse_statuses(["running,nope"])


@pytest.mark.fast
def test_ids_resolve_by_unique_prefix_or_suffix_and_an_exact_id_wins() -> None:
    known = ["job-20260501-120000-5732ef", "job-20260501-120500-a1b2c3", "job-1", "job-10"]
    assert resolve_job_id("5732ef", known) == "job-20260501-120000-5732ef"
    assert resolve_job_id("job-20260501-1205", known) == "job-20260501-120500-a1b2c3"
    assert resolve_job_id("job-1", known) == "job-1", "an exact id is never ambiguous"
    with pytest.raises(AmbiguousJob) as ambiguous:
        resolve_job_id("job-2026", known)
    assert ambiguous.value.candidates == known[:2] and ambiguous.value.exit_code == 2
    with pytest.raises(NoSuchJob):
        resolve_job_id("zzz", known)


async def test_jobs_filters_combine_newest_first(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    url, root = amqtt.url, str(ws.root)
    jobs = [  # (id, agent, session, labels, parent)
        ("job-root", "codex", "s1", {"team": "core"}, None),
        ("job-kid1", "codex", "s1", {"team": "core", "area": "db"}, "job-root"),
        ("job-kid2", "claude", "s2", {"team": "web"}, "job-root"),
        ("job-late", "codex", None, {"team": "core"}, None),
    ]
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            recorded = {}
            for job_id, agent, session, labels, parent in jobs:
                record = await pub.submit(
                    prompt=f"do {job_id}",
                    agent=agent,
                    job_id=job_id,
                    agent_session=session,
                    labels=labels,
                    parent=parent,
                    wait=True,
                )
                recorded[job_id] = record
        topic = f"mam/{workspace_id(ws.root)}/jobs/job-kid1/events"
        await publish(url, topic, event("claimed", "c1", runner="r"))
        await publish(url, topic, event("started", "s1"))
        await wait_for_state(url, workspace_id(ws.root), "job-kid1", lambda r: r["status"] == "running")

    async def listed(*flags: str) -> list[str]:
        result = await run(mam("jobs", "--json", "--workspace", root, *flags), cwd=ws.elsewhere)
        assert result.returncode == 0, result.stderr
        return [r["job_id"] for r in json.loads(result.stdout)]

    assert await listed() == ["job-late", "job-kid2", "job-kid1", "job-root"], "newest first"
    assert await listed("--status", "running") == ["job-kid1"]
    assert await listed("--status", "running,submitted", "--agent", "claude") == ["job-kid2"]
    assert await listed("--status", "running", "--status", "submitted", "--agent", "codex") == [
        "job-late",
        "job-kid1",
        "job-root",
    ]
    assert await listed("--session", "s1") == ["job-kid1", "job-root"]
    assert await listed("--label", "team=core") == ["job-late", "job-kid1", "job-root"]
    assert await listed("--label", "team=core", "--label", "area=db") == ["job-kid1"]
    assert await listed("--parent", "root") == ["job-kid2", "job-kid1"], "a parent by a unique suffix"
    assert await listed("--parent", "job-root", "--agent", "codex") == ["job-kid1"]
    late = recorded["job-late"].submitted_at  # type: ignore[union-attr]
    assert await listed("--since", late) == ["job-late"]
    assert await listed("--since", "1h", "--limit", "2") == ["job-late", "job-kid2"]
    assert await listed("--since", "1h", "--label", "team=core", "--agent", "codex", "--limit", "1") == ["job-late"]

    table = await run(mam("jobs", "--status", "running", "--workspace", root), cwd=ws.elsewhere)
    header, row = table.stdout.decode().splitlines()
    assert header.split() == ["JOB", "STATUS", "AGENT", "SESSION", "AGE", "DURATION", "PROMPT"]
    assert row.split()[:4] == ["job-kid1", "running", "codex", "s1"] and " ago " in row
    assert "\x1b[" not in table.stdout.decode(), "no colour when piped"
    limited = await run(mam("jobs", "--limit", "1", "--workspace", root), cwd=ws.elsewhere)
    assert "showing the newest 1 of 4 jobs" in limited.stderr.decode()
    bad = await run(mam("jobs", "--status", "done", "--workspace", root), cwd=ws.elsewhere)
    assert bad.returncode == 2 and "--status: 'done' is not a status" in bad.stderr.decode()


async def test_every_reading_command_takes_a_unique_prefix_or_suffix(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    url, root = amqtt.url, str(ws.root)
    ids = ["job-20260501-120000-5732ef", "job-20260501-120500-a1b2c3"]
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            for job_id in ids:
                await pub.submit(prompt="line one\nline two\n\tindented", agent="a", job_id=job_id, wait=True)

        for command in (("show", "5732ef", "--json"), ("events", "5732ef", "--json"), ("logs", "5732ef")):
            result = await run(mam(*command, "--workspace", root), cwd=ws.elsewhere)
            assert result.returncode == 0, (command, result.stderr)
        shown = await run(mam("show", "job-20260501-1205", "--workspace", root), cwd=ws.elsewhere)
        lines = shown.stdout.decode().splitlines()
        assert lines[0].split() == ["Job:", ids[1]]
        at = next(i for i, line in enumerate(lines) if line.startswith("Prompt:"))
        assert lines[at : at + 3] == [f"{'Prompt:':<14}line one", f"{'':<14}line two", f"{'':<14}    indented"]
        assert any(line.startswith("Submitted:") and line.endswith(("ago)", "(just now)")) for line in lines)

        for command in ("show", "events", "logs"):
            result = await run(mam(command, "job-2026", "--workspace", root), cwd=ws.elsewhere)
            err = result.stderr.decode()
            assert result.returncode == 2, (command, err)
            assert "ambiguous" in err and ids[0] in err and ids[1] in err and err.count("\n") == 1
        missing = await run(mam("show", "zzz", "--workspace", root), cwd=ws.elsewhere)
        assert missing.returncode == 1 and "no job 'zzz'" in missing.stderr.decode()

        # mam cancel is a writer and opens no registry file: it resolves against the retained states.
        ambiguous = await run(mam("cancel", "job-2026", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
        assert ambiguous.returncode == 2 and ids[0] in ambiguous.stderr.decode()
        cancelled = await run(mam("cancel", "a1b2c3", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.decode().split() == [ids[1], "cancelled"]
        assert f"a1b2c3 is job {ids[1]}" in cancelled.stderr.decode(), "the job a short id meant is named"
