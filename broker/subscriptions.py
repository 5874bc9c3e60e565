"""amqtt's subscription table, iterated over a snapshot.

amqtt 0.12 walks its live `_subscriptions` dict (topic filter -> list of
(session, QoS)) and awaits inside the walk: `Broker._run_broadcast` asks the
topic ACL about each subscriber (plugin tasks, a real suspension the first time
mam's verdict memo meets a (client, topic) pair) and queues for offline
sessions, and a connecting client's retained replay awaits per filter. A
SUBSCRIBE, UNSUBSCRIBE or disconnect landing meanwhile adds or deletes a
filter, the walk raises `RuntimeError: dictionary changed size during
iteration`, and every subscriber after that point never gets the message; a
holder removed from a filter's list in place makes the walk skip the next one.
With one client churning subscriptions, a subscriber missed 347 of 3,000
messages. In mam that was a `mam submit` whose state never came (its filter,
the newest, is walked last) while other clients came and went.

The table hands out copies where amqtt iterates it (`for f in table`,
`table.items()`, which copies each filter's holders too); the lists amqtt
appends to and pops from are reached by indexing, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class SubscriptionTable(dict[str, list[tuple[Any, int]]]):
    """`Broker._subscriptions`: a dict whose iteration never sees it change."""

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))

    def items(self) -> list[tuple[str, list[tuple[Any, int]]]]:  # type: ignore[override]
        return [(a_filter, list(holders)) for a_filter, holders in super().items()]
