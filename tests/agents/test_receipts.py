"""End-to-end acknowledgement, the pure part: which state settles which runner event, what is sent again
and when, and what a full buffer forgets (agents/receipts.py, the outbox's resend)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from runner_units_support import FakeClient

from mam.agents import unsent
from mam.agents.delivery import shows_recorded
from mam.agents.outbox import Outbox
from mam.agents.receipts import Awaits, Kept, Receipts, awaits, settled
from mam.agents.unsent import Unsent
from mam.contract import events as ev
from mam.contract.record import JobRecord, Status
from mam.contract.topics import Topics
from mam.contract.workspace import resolve

pytestmark = pytest.mark.fast


def record(
    status: Status = Status.RUNNING, *, version: int = 5, attempt: int | None = None, **fields: object
) -> JobRecord:
    return JobRecord(
        job_id="j",
        workspace="ws",
        status=status,
        agent="a",
        prompt="p",
        submitted_at="t",
        updated_at="t",
        version=version,
        **({"attempt": attempt} if attempt else {}),
        **fields,
    )  # type: ignore[arg-type]


def test_heartbeats_and_progress_are_never_kept() -> None:
    assert awaits(ev.Heartbeat(runner="r"), 1) is None
    assert awaits(ev.Progress(message="m"), 1) is None
    assert awaits(ev.Output(text="x"), 1) is None, "an unnumbered output cannot be confirmed"


def test_a_claim_is_settled_once_the_job_moved_past_the_version_it_claimed() -> None:
    want = awaits(ev.Claimed(runner="r", expected_version=3), 1)
    assert want is not None
    assert not settled(want, record(Status.SUBMITTED, version=3))
    assert settled(want, record(Status.CLAIMED, version=4))
    assert settled(want, record(Status.CLAIMED, version=4, runner="someone-else")), "lost the race: moot"


@pytest.mark.parametrize(
    ("seqs", "status", "missing", "expected"),
    [
        ([(0, 4)], Status.RUNNING, None, True),
        ([(0, 2), (4, 4)], Status.RUNNING, None, False),
        ([], Status.RUNNING, None, False),
        ([(0, 2)], Status.SUCCEEDED, [(3, 3)], False),  # named missing: a resend fills the gap
        ([(0, 2)], Status.LOST, None, True),  # ended elsewhere without counting: moot
    ],
)
def test_an_output_is_settled_by_its_seq_in_the_state(
    seqs: list, status: Status, missing: list | None, expected: bool
) -> None:
    extra = {"output_seqs": seqs} | ({"outputs_missing": missing, "outputs_expected": 5} if missing else {})
    assert settled(Awaits("output", 1, seq=3), record(status, **extra)) is expected


def test_an_output_waits_while_its_start_is_not_recorded_and_not_under_a_projector_that_keeps_no_seqs() -> None:
    assert not settled(Awaits("output", 1, seq=0), record(Status.CLAIMED))
    assert settled(Awaits("output", 1, seq=0), record(Status.RUNNING)), "no output_seqs: the broker's ack is all"


def test_start_outcome_and_release_are_settled_by_the_status_of_their_attempt() -> None:
    assert not settled(Awaits("started", 1), record(Status.CLAIMED))
    assert settled(Awaits("started", 1), record(Status.RUNNING))
    assert not settled(Awaits("succeeded", 1), record(Status.RUNNING))
    assert settled(Awaits("succeeded", 1), record(Status.SUCCEEDED))
    assert not settled(Awaits("released", 1), record(Status.RUNNING))
    assert settled(Awaits("released", 1), record(Status.SUBMITTED, attempt=2)), "the next attempt took it"


def test_a_later_attempt_settles_an_earlier_ones_events_and_an_older_state_settles_nothing() -> None:
    assert settled(Awaits("output", 1, seq=7), record(Status.SUBMITTED, attempt=2))
    assert settled(Awaits("failed", 1), record(Status.RUNNING, attempt=2))
    stale = record(Status.SUCCEEDED, attempt=1)
    assert not settled(Awaits("started", 2), stale), "a stale retained state of attempt 1 settles nothing of 2"
    assert not settled(Awaits("failed", 2), stale)


def kept(n: int, kind: str = "output", *, size: int = 10, job: str = "j") -> Kept:
    return Kept(job, f"e{n}", "t", b"x" * size, Awaits(kind, 1, seq=n if kind == "output" else None))


def test_kept_events_are_due_after_their_wait_doubling_and_all_at_once_when_asked() -> None:
    receipts = Receipts(after=10, most=25)
    receipts.keep(kept(0))
    assert receipts.due(100.0, everything=True) == [], "a copy still waiting in the outbox is not due"
    receipts.acked("j", "e0", 100.0)
    assert receipts.next_due() == 110.0 and receipts.due(109.0) == []
    assert [k.event_id for k in receipts.due(110.0)] == ["e0"]
    receipts.acked("j", "e0", 111.0)
    assert receipts.next_due() == 131.0, "doubled after a send"
    receipts.due(131.0)
    receipts.acked("j", "e0", 132.0)
    assert receipts.next_due() == 157.0, "capped"
    assert [k.event_id for k in receipts.due(133.0, everything=True)] == ["e0"]


def test_a_state_or_a_refusal_forgets_what_it_settles() -> None:
    receipts = Receipts()
    for n in range(4):
        receipts.keep(kept(n))
    assert receipts.settle(record(output_seqs=[(0, 1)])) == 2 and len(receipts) == 2
    assert receipts.refused("j", "e2") and not receipts.refused("j", "e2")
    assert receipts.settle(record(output_seqs=[(0, 3)])) == 1 and not receipts and not receipts.awaiting("j")


def test_a_full_buffer_forgets_the_oldest_acknowledged_outputs_and_never_a_jobs_outcome() -> None:
    receipts = Receipts(max_bytes=35)
    receipts.keep(kept(0, "failed"))
    for n in range(1, 5):
        receipts.keep(kept(n))
    for n in range(5):
        receipts.acked("j", f"e{n}", 1.0)
    assert receipts.forgotten == 2 and receipts.bytes <= 35
    assert sorted(receipts.by_job().items()) == [("j", 3)]
    assert receipts.settle(record(Status.RUNNING, output_seqs=[(0, 4)])) == 2, "e3 and e4 were kept"
    assert receipts.awaiting("j"), "the outcome is still kept"


async def test_the_outbox_sends_a_kept_event_again_byte_for_byte_until_its_state_settles_it() -> None:
    outbox = Outbox(Topics("ws"), by="r1", window=8)
    sent = outbox.put("j", ev.Output(text="line\n", seq=0), 1)
    outbox.put("j", ev.Heartbeat(runner="r1"), 1)
    client = FakeClient()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.send, client)
        with anyio.fail_after(5):
            await outbox.drained()
        assert outbox.awaiting("j"), "acknowledged by the broker, not yet recorded"
        assert outbox.resend(everything=True) == 1, "the output, not the heartbeat"
        with anyio.fail_after(5):
            await outbox.drained()
        with anyio.move_on_after(0.05) as waiting:
            await outbox.confirmed()
        assert waiting.cancelled_caught
        outbox.settle(record(output_seqs=[(0, 0)]))
        with anyio.fail_after(5):
            await outbox.confirmed()
        tg.cancel_scope.cancel()
    assert client.calls[2] == client.calls[0] and msgspec.json.decode(client.calls[0])["id"] == sent.id
    assert len(client.calls) == 3


def test_after_a_resend_a_state_counts_as_the_verdict_when_it_shows_the_events_effect() -> None:
    submitted = ev.Submitted(prompt="p", agent="a", id="s1")
    assert shows_recorded(record(Status.CLAIMED, last_event_id="c1"), submitted), "a runner claimed it since"
    assert not shows_recorded(
        record(Status.CLAIMED, last_event_id="c1"), ev.Submitted(prompt="other", agent="a", id="s2")
    ), "another job's"
    asked = ev.InputRequested(question="q", id="q1")
    assert shows_recorded(record(Status.RUNNING, question_id="q1", last_event_id="x"), asked)
    answer = ev.InputProvided(answer="yes", question_id="q1", id="a1")
    assert shows_recorded(record(Status.RUNNING, question_id="q1", answer="yes", last_event_id="x"), answer)
    assert not shows_recorded(record(Status.WAITING, question_id="q1", last_event_id="x"), answer)
    assert not shows_recorded(record(Status.LOST, question_id="q1", last_event_id="x"), answer), (
        "a job lost while it waited was not answered: the resent answer's verdict is the projector's refusal"
    )
    assert shows_recorded(
        record(Status.RUNNING, cancel_requested_at="t", last_event_id="x"), ev.CancelRequested(id="k1")
    )
    assert not shows_recorded(record(Status.RUNNING, last_event_id="x"), ev.Progress(message="m", id="p1"))


async def test_what_a_runner_stops_with_is_every_unsent_and_every_unconfirmed_event_but_heartbeats_and_claims() -> None:
    """`Outbox.unsent()` (what a stopping runner writes for the next one, `unsent.py`): the events the broker took
    but the projector has not recorded, then those the broker never took, each once, in the order made."""
    outbox = Outbox(Topics("ws"), by="r1", window=8)
    made = [
        outbox.put("job-a", event, 1)
        for event in (
            ev.Claimed(runner="r1", epoch="e", expected_version=1),
            ev.Started(runner="r1"),
            ev.Output(stream="stdout", text="one\n", seq=0),
            ev.Heartbeat(runner="r1", seq=1),
        )
    ]
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.send, FakeClient())
        with anyio.fail_after(5):
            await outbox.drained()  # the broker took them all; the projector recorded none
        tg.cancel_scope.cancel()
    later = [
        outbox.put("job-a", event, 1)
        for event in (
            ev.Output(stream="stdout", text="two\n", seq=1),
            ev.Heartbeat(runner="r1", seq=2),
            ev.Released(reason="stopped", outputs=2),
        )
    ]
    outbox.resend(everything=True)  # the kept ones queued again: still said once each
    kept = outbox.unsent()
    assert [event.event_id for event in kept] == [e.id for e in (made[1], made[2], later[0], later[2])]
    assert [event.kind for event in kept] == ["started", "output", "output", "released"]
    assert all(event.topic == Topics("ws").events("job-a") and event.job_id == "job-a" for event in kept)
    assert outbox.unsent()[0].payload == ev.encode_event(made[1]), "the bytes as made, to be sent as they are"


def test_a_file_of_unsent_events_is_taken_by_one_runner_at_a_time_and_reads_back_byte_for_byte(tmp_path: Path) -> None:
    workspace = resolve(workspace=tmp_path, env={})
    events = [
        Unsent(f"mam/{workspace.id}/jobs/job-a/events", payload, "job-a", f"e{n}", "output")
        for n, payload in enumerate([b'{"type":"output","text":"\xc3\xa9\\n"}', b"\xff not text"])
    ]
    path = unsent.write(workspace, "r1", "0123456789abcdef", events)
    assert path == tmp_path / ".mam" / "unsent" / "r1-0123456789ab.jsonl"
    assert path.stat().st_mode & 0o777 == 0o600
    [taken] = unsent.take_all(workspace)
    assert taken.events == events and taken.path == path
    assert unsent.take_all(workspace) == [], "a file another runner holds is not taken again"
    taken.release()
    [again] = unsent.take_all(workspace)
    again.done()
    assert not path.exists() and unsent.take_all(workspace) == []
