"""Output is accounted end to end: a runner's terminal event says how many output events it published,
the record says which of them the log lacks, and `mam show`, `mam logs` and the dashboard say so.

Also how events evolve: a field this release does not know is read and ignored (docs/design/contract.md, Events).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from dashboard_support import browser_page, up_with_dashboard
from msgspec import UNSET
from runner_support import agent_runner, log_events, mock_command, submit

from mam.contract import events as ev
from mam.contract.fold import Context, Refusal, apply
from mam.contract.output_accounting import incomplete_lines
from mam.contract.record import JobRecord, decode_record, encode_record
from mam.contract.topics import Topics

from brokers import RunningBroker
from e2e import projector_process, workspace_id, write_job
from support import mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

MISSING_4_7 = "output incomplete: 2 of 10 output events missing (seq 4, 7)"


def fold(*events: ev.AnyEvent) -> JobRecord:
    state: JobRecord | None = None
    for n, event in enumerate(events):
        ctx = Context(job_id="job-1", workspace="ws", event_id=f"e{n}", received_at=f"2026-01-01T00:00:{n:02}.000Z")
        result = apply(state, event, ctx)
        assert not isinstance(result, Refusal), result.reason
        state = result
    assert state is not None
    return state


def outputs(seqs: Iterable[int]) -> list[ev.AnyEvent]:
    return [ev.Output(text=f"line {seq}\n", seq=seq) for seq in seqs]


def started() -> list[ev.AnyEvent]:
    return [ev.Claimed(runner="r1"), ev.Started(runner="r1", pid=7, counts_outputs=True)]


@pytest.mark.fast
def test_a_runner_attempt_whose_every_output_is_logged_is_complete() -> None:
    record = fold(ev.Submitted(prompt="p", agent="a"), *started(), *outputs(range(10)), ev.Succeeded(outputs=10))
    assert (record.output_seqs, record.outputs_expected, record.outputs_missing) == ([(0, 9)], 10, [])
    assert incomplete_lines(record) == []


@pytest.mark.fast
def test_outputs_lost_on_the_way_are_named_by_seq_whatever_order_the_rest_came_in() -> None:
    arrived = [0, 1, 2, 3, 5, 6, 9, 8]  # 4 and 7 never came; 9 overtook 8
    record = fold(
        ev.Submitted(prompt="p", agent="a"), *started(), *outputs(arrived), ev.Failed(exit_code=1, outputs=10)
    )
    assert record.output_seqs == [(0, 3), (5, 6), (8, 9)] and record.outputs_missing == [(4, 4), (7, 7)]
    assert incomplete_lines(record) == [MISSING_4_7]
    # The missing tail counts too: an attempt said 12, the log holds 0..9 without 4 and 7.
    record = fold(ev.Submitted(prompt="p", agent="a"), *started(), *outputs(arrived), ev.TimedOut(outputs=12))
    assert incomplete_lines(record) == ["output incomplete: 4 of 12 output events missing (seq 4, 7, 10-11)"]


@pytest.mark.fast
def test_an_output_named_missing_that_comes_after_the_outcome_fills_its_gap_and_nothing_else() -> None:
    """A broker's redelivery (NATS after ack_wait) can bring an output after the outcome that counts it
    was applied at the settle bound: the finished record takes it (seq, bytes) and names only what is
    still missing; its status, times and result stay; an output not named missing is still refused."""
    ended = fold(
        ev.Submitted(prompt="p", agent="a", retries=1),
        *started(),
        *outputs([0, 1, 3]),
        ev.Succeeded(outputs=5, result="done"),
    )
    assert ended.outputs_missing == [(2, 2), (4, 4)] and ended.attempts[-1].outputs_missing == [(2, 2), (4, 4)]
    ctx = Context(job_id="job-1", workspace="ws", event_id="late", received_at="2026-01-01T00:01:00.000Z")
    filled = apply(ended, ev.Output(text="line 4\n", seq=4), ctx)
    assert not isinstance(filled, Refusal), filled.reason
    assert (filled.status, filled.result, filled.finished_at) == (ended.status, "done", ended.finished_at)
    assert filled.output_seqs == [(0, 1), (3, 4)] and filled.outputs_missing == [(2, 2)]
    assert filled.attempts[-1].outputs_missing == [(2, 2)], "the ended attempt's copy follows"
    assert filled.output_bytes == ended.output_bytes + len("line 4\n") and filled.version == ended.version + 1
    assert incomplete_lines(filled) == ["output incomplete: 1 of 5 output events missing (seq 2)"]
    for refused in (ev.Output(text="again\n", seq=4), ev.Output(text="x\n", seq=9), ev.Output(text="plain\n")):
        result = apply(filled, refused, ctx)
        assert isinstance(result, Refusal) and "a finished job never changes" in result.reason


@pytest.mark.fast
def test_each_attempt_numbers_its_output_from_0_and_keeps_its_own_accounting() -> None:
    first = [ev.Submitted(prompt="p", agent="a", retries=1), *started(), *outputs([0, 2]), ev.Failed(outputs=3)]
    retry = ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, tzinfo=UTC))
    retried = fold(*first, retry)
    assert retried.output_seqs is UNSET and retried.outputs_expected is UNSET and retried.outputs_missing is UNSET
    record = fold(*first, retry, *started(), *outputs(range(2)), ev.Succeeded(outputs=2))
    assert isinstance(record.attempts, list)
    assert [(a.attempt, a.outputs_expected, a.outputs_missing) for a in record.attempts] == [
        (1, 3, [(1, 1)]),
        (2, 2, []),
    ]
    assert incomplete_lines(record) == ["attempt 1: output incomplete: 1 of 3 output events missing (seq 1)"]


@pytest.mark.fast
def test_a_log_from_before_these_keys_folds_to_the_bytes_it_had() -> None:
    """A runner of the release before numbered its output but said neither `counts_outputs` nor `outputs`:
    its jobs' logs fold to records without the new keys, so `mam rebuild --verify` still reproduces them."""
    old_runner = [
        ev.Submitted(prompt="p", agent="a"),
        ev.Claimed(runner="r1"),
        ev.Started(runner="r1", pid=7),
        *outputs([0, 2]),
        ev.Succeeded(),
    ]
    data = encode_record(fold(*old_runner))
    assert b"output_seqs" not in data and b"outputs_" not in data
    assert encode_record(decode_record(data)) == data
    # Only the count known (its start was folded without seqs): the count is kept, nothing is claimed missing.
    record = fold(*old_runner[:-1], ev.Succeeded(outputs=3))
    assert record.outputs_expected == 3 and record.outputs_missing is UNSET
    assert incomplete_lines(record) == []


@pytest.mark.fast
def test_a_field_this_release_does_not_know_is_read_and_ignored_but_a_newer_v_is_refused() -> None:
    event = ev.decode_event(
        b'{"type":"succeeded","outputs":3,"from_the_future":{"x":[1]},'
        b'"git":{"commit":"abcdef0","also_new":true},"usage":{"turns":2,"new_unit":1}}'
    )
    assert isinstance(event, ev.Succeeded) and event.outputs == 3 and event.usage == ev.Usage(turns=2)
    assert b"from_the_future" not in ev.encode_event(event)
    with pytest.raises(ev.EventError, match=r"reads events of v 1"):
        ev.decode_event(b'{"type":"succeeded","v":2}')
    with pytest.raises(ev.EventError, match=r"missing required field `prompt`.*ignored: `promt`"):
        ev.decode_event(b'{"type":"submitted","promt":"p","agent":"a"}')


SETTLE = ("--settle-outputs", "0.5")
"""The outcome of a gapped job waits this long for its missing outputs (default 10 s), then is applied."""


async def publish_gapped_job(url: str, ws_id: str, job_id: str) -> None:
    """A job whose output events 4 and 7 were dropped on the way; its terminal event says 10 (and carries a
    field no release knows yet)."""
    topic = Topics(ws_id).events(job_id)
    payloads = [
        {"type": "submitted", "prompt": "p", "agent": "a", "id": "s"},
        {"type": "claimed", "runner": "r1", "id": "c"},
        {"type": "started", "runner": "r1", "counts_outputs": True, "id": "st"},
        *(
            {"type": "output", "text": f"line {seq}\n", "seq": seq, "id": f"o{seq}"}
            for seq in range(10)
            if seq not in (4, 7)
        ),
        {"type": "succeeded", "outputs": 10, "id": "end", "from_the_future": {"note": "ignored"}},
    ]
    for payload in payloads:
        await publish(url, topic, json.dumps(payload).encode())


async def test_a_gap_in_the_published_output_is_in_the_record_and_said_by_show_and_logs(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    old_record = write_job(ws, "old-job")  # a record from before these keys
    async with projector_process(amqtt, ws.root, ws.elsewhere, extra=SETTLE):
        await publish_gapped_job(amqtt.url, ws_id, "gapped")
        state = await wait_for_state(amqtt.url, ws_id, "gapped", lambda r: r["status"] == "succeeded")
    assert (state["outputs_expected"], state["outputs_missing"]) == (10, [[4, 4], [7, 7]])
    assert [e["id"] for e in log_events(ws, "gapped")][-1] == "end"  # the event with an unknown field was recorded

    where = ("--workspace", str(ws.root))
    shown = await run(mam("show", "gapped", *where), cwd=ws.elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert MISSING_4_7 in shown.stdout.decode()
    assert "outputs_missing" not in shown.stdout.decode(), "the accounting is said in words; -o json has the keys"
    logs = await run(mam("logs", "gapped", *where), cwd=ws.elsewhere)
    assert logs.returncode == 0 and logs.stdout.decode() == "".join(f"line {s}\n" for s in range(10) if s not in (4, 7))
    assert f"mam: {MISSING_4_7}" in logs.stderr.decode()

    verify = await run(mam("rebuild", "--verify", *where), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()
    assert (ws.jobs / "old-job.json").read_bytes() == old_record


async def test_a_runner_job_says_how_many_outputs_it_made_and_the_record_holds_them_all(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), agent_runner(amqtt.url, ws, *mock_command()):
        await submit(amqtt.url, ws, "streamed", "stream 6")
        state = await wait_for_state(amqtt.url, ws_id, "streamed", lambda r: r["status"] == "succeeded")
    events = log_events(ws, "streamed")
    published = [e["seq"] for e in events if e["type"] == "output"]
    assert published and events[-1]["outputs"] == len(published)
    assert state["output_seqs"] == [[0, len(published) - 1]]
    assert (state["outputs_expected"], state["outputs_missing"]) == (len(published), [])
    shown = await run(mam("show", "streamed", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert shown.returncode == 0 and "output incomplete" not in shown.stdout.decode()


async def test_the_dashboard_detail_says_which_outputs_are_missing(ws: WorkspacePaths) -> None:
    from playwright.async_api import expect

    async with up_with_dashboard(ws, *SETTLE) as (url, page_url), browser_page() as page:
        await publish_gapped_job(url, workspace_id(ws.root), "gapped")
        await wait_for_state(url, workspace_id(ws.root), "gapped", lambda r: r["status"] == "succeeded")
        await page.goto(f"{page_url}?job=gapped")
        await expect(page.locator("#detail-incomplete")).to_have_text(MISSING_4_7, timeout=15_000)
        await expect(page.locator("#detail-incomplete")).to_be_visible()
