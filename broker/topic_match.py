"""MQTT topic filter matching, compiled once per filter.

amqtt's `Broker._matches` splits the filter and the topic into levels on every
call, and the broker calls it for every subscription on every publish it
routes. Here each filter becomes a regular expression (or, without wildcards,
an equality test) the first time it is seen, with amqtt's semantics exactly:
`+` is one level (possibly empty), a trailing `#` is its parent and any levels
below it, a wildcard sharing a level with other characters matches nothing, and
a topic starting with `$` matches no filter that starts with a wildcard
(MQTT-4.7.2-1).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

Matcher = Callable[[str], bool]


def matches(topic: str, a_filter: str) -> bool:
    """Whether `topic` matches the subscription filter `a_filter`."""
    return matcher(a_filter)(topic)


@functools.lru_cache(maxsize=4096)
def matcher(a_filter: str) -> Matcher:
    """A test of topics against `a_filter`, built once per filter."""
    if "#" not in a_filter and "+" not in a_filter:
        return a_filter.__eq__
    levels = a_filter.split("/")
    parts: list[str] = []
    for i, level in enumerate(levels):
        if level == "#":
            if i != len(levels) - 1:
                return _never
            parts.append("(?:/.*)?" if parts else ".*")
            break
        if ("+" in level and level != "+") or "#" in level:
            return _never
        parts.append(("/" if i else "") + ("[^/]*" if level == "+" else re.escape(level)))
    compiled = re.compile("".join(parts), re.DOTALL).fullmatch
    if a_filter.startswith(("+", "#")):
        return lambda topic: not topic.startswith("$") and compiled(topic) is not None
    return lambda topic: compiled(topic) is not None


def _never(topic: str) -> bool:
    del topic
    return False
