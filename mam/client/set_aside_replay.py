"""`mam set-aside --replay`: each message set aside published again, as it came, and the projector's verdict.

The message goes through the broker, as any publisher's: the same topic, the same bytes (a runner's
signature in them holds), QoS 1. The projector knows it for one it set aside (`projector/set_aside.py`): it
gives it one try, alone in its batch; handled (recorded, a duplicate by its event id, or refused with a
reason), it leaves `_set_aside.jsonl`; failing again, it keeps its line with `tried_again` counted. Both are in
the file before the message is acknowledged, so the verdict is read there (the file is the projector's, on this
machine), waiting at most `timeout` seconds for it. Publishing an event twice is safe: its id dedupes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import aiomqtt
import anyio

from mam.client.failover import connect
from mam.client.mqtt import unreachable
from mam.contract.broker_list import Brokers
from mam.registry.set_aside_file import SetAsideEntry, entry_id, payload_of, read_entries

Verdict = Literal["handled", "still set aside", "not kept", "no verdict"]

LOOK_EVERY: Final = 0.1
"""Seconds between two reads of the file while the verdicts are awaited."""


@dataclass(frozen=True, slots=True)
class Replayed:
    """What became of one message published again."""

    id: str
    topic: str
    verdict: Verdict
    reason: str | None = None
    """Why it is still set aside (the new failure), or why it was not published."""


async def replay(brokers: Brokers, logs_dir: Path, entries: list[SetAsideEntry], *, timeout: float) -> list[Replayed]:
    """Publish each entry's bytes again (an entry that did not keep them is `not kept`), then wait for each
    verdict in the file. `BrokerUnreachable` if no broker answers."""
    sent: dict[str, SetAsideEntry] = {}
    outcomes: dict[str, Replayed] = {}
    try:
        async with connect(brokers) as client:
            for entry in entries:
                key, payload = entry_id(entry), payload_of(entry)
                if payload is None:
                    outcomes[key] = Replayed(
                        key,
                        entry.topic,
                        "not kept",
                        "its bytes were not kept (the file had "
                        "passed 64 MiB): publish it again by hand from its excerpt",
                    )
                    continue
                await client.publish(entry.topic, payload, qos=1)
                sent[key] = entry
    except aiomqtt.MqttError as exc:
        raise unreachable(brokers, exc) from None
    with anyio.move_on_after(timeout):
        while sent:
            now = {entry_id(entry): entry for entry in await anyio.to_thread.run_sync(read_entries, logs_dir)}
            for key, before in list(sent.items()):
                after = now.get(key)
                if after is None:
                    outcomes[key] = Replayed(key, before.topic, "handled")
                elif after.tried_again_at != before.tried_again_at:
                    outcomes[key] = Replayed(key, before.topic, "still set aside", after.reason)
                else:
                    continue
                del sent[key]
            if sent:
                await anyio.sleep(LOOK_EVERY)
    for key, entry in sent.items():
        outcomes[key] = Replayed(
            key,
            entry.topic,
            "no verdict",
            f"the projector said nothing within {timeout:g}s "
            "(is it running? `mam workspace`); it tries the message at its next start",
        )
    return [outcomes[entry_id(entry)] for entry in entries]


__all__ = ["Replayed", "Verdict", "replay"]
