"""Fleet concurrency limits: how many jobs of an agent, or requiring a label, may be held at once.

`.mam/config.json`: `{"limits": {"agents": {"claude-code": 3}, "labels": {"gpu=a100": 2}}}`. A limit
counts the workspace's claimed, running and waiting jobs (across every runner): of that agent name, or
whose `require` includes that `key=value` pair. The projector offers no job beyond a limit and refuses a
claim that would pass one, naming it (`projector/dispatch.py`). Pure parsing and counting, no I/O but
reading the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mam.contract import routing
from mam.contract.errors import UsageError
from mam.contract.ids import AGENT_ID_PATTERN
from mam.contract.record import JobRecord
from mam.contract.workspace_config import config_entry

MAX_LIMIT: Final = 1_000_000
_AGENT: Final = re.compile(AGENT_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class FleetLimits:
    agents: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    """By `key=value` pair."""

    def __bool__(self) -> bool:
        return bool(self.agents or self.labels)

    def keys_of(self, record: JobRecord) -> list[str]:
        """The limits a job counts against, by their config path (`limits.agents.shell`, `limits.labels.gpu=a100`)."""
        keys = [f"limits.agents.{record.agent}"] if record.agent in self.agents else []
        keys += [
            f"limits.labels.{pair}"
            for key, value in sorted(routing.required(record).items())
            if (pair := f"{key}={value}") in self.labels
        ]
        return keys

    def limit(self, key: str) -> int:
        kind, _, name = key.removeprefix("limits.").partition(".")
        return (self.agents if kind == "agents" else self.labels)[name]

    def count(self, held: Iterable[JobRecord]) -> dict[str, int]:
        """How many held (claimed, running, waiting) jobs count against each limit."""
        counts: dict[str, int] = {}
        for record in held:
            for key in self.keys_of(record):
                counts[key] = counts.get(key, 0) + 1
        return counts

    def reached(self, record: JobRecord, counts: dict[str, int]) -> str | None:
        """The first limit one more job like `record` would pass, in words; None when it fits."""
        for key in self.keys_of(record):
            if counts.get(key, 0) >= self.limit(key):
                return f"fleet limit {key} = {self.limit(key)} reached ({counts.get(key, 0)} held)"
        return None


def load(workspace_root: Path) -> FleetLimits:
    """The workspace's `limits`, or none; a value that cannot be one is a one-line error naming it."""
    path, entry = config_entry(workspace_root, "limits")
    return FleetLimits() if entry is None else parse(entry, where=f"{path}: limits")


def parse(entry: object, *, where: str = "limits") -> FleetLimits:
    if not isinstance(entry, dict):
        raise UsageError(f'{where}: expected an object such as {{"agents": {{"claude-code": 3}}}}, got {entry!r}')
    unknown = sorted(set(entry) - {"agents", "labels"})
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: agents, labels)")
    agents = _counts(entry.get("agents", {}), f"{where}.agents", _agent_name)
    labels = _counts(entry.get("labels", {}), f"{where}.labels", _label_pair)
    return FleetLimits(agents=agents, labels=labels)


def _counts(section: object, where: str, check_name: Callable[[str], bool]) -> dict[str, int]:
    if not isinstance(section, dict):
        raise UsageError(f"{where}: expected an object of name: count, got {section!r}")
    counts: dict[str, int] = {}
    for name, value in section.items():
        if not check_name(name):
            raise UsageError(f"{where}: {name!r} is not a valid name here")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LIMIT:
            raise UsageError(f"{where}.{name}: {value!r} is not a count (an integer from 0 to {MAX_LIMIT})")
        counts[name] = value
    return counts


def _agent_name(name: str) -> bool:
    return bool(_AGENT.match(name))


def _label_pair(name: str) -> bool:
    key, sep, value = name.partition("=")
    return bool(sep) and bool(routing.KEY_PATTERN.fullmatch(key)) and len(value) <= 256


__all__ = ["FleetLimits", "load", "parse"]
