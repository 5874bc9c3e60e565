"""The runner's pure-ish parts with fakes: the outbox's order and resend, the output streamer's last bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
from runner_units_support import FakeClient, drain

from mam.agents.outbox import Outbox
from mam.agents.output import OutputStreamer
from mam.contract import events as ev
from mam.contract.topics import Topics

pytestmark = pytest.mark.fast


def ids(payloads: list[bytes]) -> list[str]:
    return [msgspec.json.decode(p)["id"] for p in payloads]


def filled(n: int) -> tuple[Outbox, list[str]]:
    outbox = Outbox(Topics("ws"), by="r1", window=8)
    made = [outbox.put("job-1", ev.Heartbeat(runner="r1")).id or "" for _ in range(n)]
    return outbox, made


async def test_the_outbox_sends_in_order_and_empties_once_everything_is_acknowledged() -> None:
    outbox, made = filled(50)
    client = await drain(outbox)
    assert ids(client.calls) == made and len(outbox) == 0


async def test_what_a_broken_connection_did_not_acknowledge_is_resent_in_order_with_the_same_ids() -> None:
    outbox, made = filled(50)
    first = FakeClient(fail_at=20)
    with pytest.raises(ExceptionGroup):
        await outbox.send(first)
    assert 0 < len(outbox) < 50
    second = FakeClient()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.send, second)
        with anyio.fail_after(5):
            await outbox.drained()
        tg.cancel_scope.cancel()
    resent = ids(second.calls)
    start = made.index(resent[0])
    assert resent == made[start:], "resent from the oldest unacknowledged one, in order, none skipped"
    assert set(made[:start]) <= set(ids(first.acked)), "only acknowledged events are not resent"


async def test_the_outbox_pushes_back_on_output_when_full() -> None:
    outbox = Outbox(Topics("ws"), by="r1", max_bytes=1000)
    outbox.put("job-1", ev.Output(text="x" * 2000, seq=0))
    with anyio.move_on_after(0.05) as waiting:
        await outbox.room()
    assert waiting.cancelled_caught, "room() waits while the outbox is over its limit"
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.send, FakeClient())
        with anyio.fail_after(5):
            await outbox.room()
        tg.cancel_scope.cancel()


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_the_streamer_sends_every_character_including_a_split_multibyte_one_and_a_truncated_end() -> None:
    sent: list[ev.AnyEvent] = []
    streamer = OutputStreamer(sent.append, chunk=4)
    text = "héllo wörld"
    data = text.encode()
    await streamer.read("stdout", _chunks(data[:2], data[2:7], data[7:], b"\xe2\x82"))  # ends mid-character
    outputs = [e for e in sent if isinstance(e, ev.Output)]
    assert len(outputs) == len(sent)
    assert "".join(e.text for e in outputs) == text + "\ufffd", "the decoder's last bytes are flushed, not dropped"
    assert [e.seq for e in outputs] == list(range(len(outputs))) and all(len(e.text) <= 4 for e in outputs)
