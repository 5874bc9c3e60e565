"""Totals of what agents reported they used: cost and tokens, over jobs, by agent, session or delegation tree.

Plain functions over records (`JobRecord.usage`), no I/O: `mam usage`
(`mam/cli/usage.py`) prints them. A job whose agent reported nothing counts as a
job and adds nothing; a total says how many of its jobs reported usage, and
its cost is unknown (None) when none of them reported a cost, rather than $0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from msgspec import UnsetType

from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord

By = Literal["agent", "session", "parent"]
BY: Final = ("agent", "session", "parent")
NO_SESSION: Final = "-"


def usage_of(record: JobRecord) -> Usage | None:
    return None if isinstance(record.usage, UnsetType) else record.usage


def cost_of(record: JobRecord) -> float | None:
    usage = usage_of(record)
    return usage.cost_usd if usage is not None else None


def money(cost: float | None) -> str:
    """`$0.0123` (four places under a dollar, two above); `-` when unknown."""
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


@dataclass
class Totals:
    """Sums over some jobs; a sum stays None until a job reports that field."""

    jobs: int = 0
    reporting: int = 0
    """How many of the jobs reported any usage."""
    cost_usd: float | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None

    def add(self, record: JobRecord) -> None:
        self.jobs += 1
        usage = usage_of(record)
        if usage is None:
            return
        self.reporting += 1
        if usage.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + usage.cost_usd, 9)
        self.input_tokens = _plus(self.input_tokens, usage.input_tokens)
        self.cached_input_tokens = _plus(self.cached_input_tokens, usage.cached_input_tokens)
        self.output_tokens = _plus(self.output_tokens, usage.output_tokens)
        self.turns = _plus(self.turns, usage.turns)

    def as_dict(self) -> dict[str, object]:
        return {
            "jobs": self.jobs,
            "jobs_reporting_usage": self.reporting,
            "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "turns": self.turns,
        }


def _plus(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return value if total is None else total + value


def total(records: Iterable[JobRecord]) -> Totals:
    sums = Totals()
    for record in records:
        sums.add(record)
    return sums


@dataclass
class Group:
    """One row: a key (an agent, a session, a job heading a tree) and its totals."""

    key: str
    totals: Totals = field(default_factory=Totals)
    depth: int = 0
    """With `--by parent`: how deep in its tree the job heading this row is (a root is 0)."""


def by_key(records: Iterable[JobRecord], key: Callable[[JobRecord], str]) -> list[Group]:
    """Totals per key, the costliest first (then by key)."""
    groups: dict[str, Group] = {}
    for record in records:
        name = key(record)
        groups.setdefault(name, Group(name)).totals.add(record)
    return sorted(groups.values(), key=lambda g: (-(g.totals.cost_usd or 0.0), g.key))


def by_tree(records: Iterable[JobRecord]) -> list[Group]:
    """Every tree's root, and every job under it that delegated, each with the totals of its whole subtree
    (itself and all its descendants), in tree order. A job whose parent is not among `records` is a root."""
    chosen = {r.job_id: r for r in records}
    children: dict[str | None, list[JobRecord]] = {}
    for record in sorted(chosen.values(), key=lambda r: (r.submitted_at, r.job_id)):
        parent = record.parent if record.parent in chosen and record.parent != record.job_id else None
        children.setdefault(parent, []).append(record)
    rows: list[Group] = []
    seen: set[str] = set()

    def walk(record: JobRecord, depth: int) -> Totals:
        seen.add(record.job_id)
        row = Group(record.job_id, depth=depth)
        rows.append(row)
        row.totals.add(record)
        kids = [kid for kid in children.get(record.job_id, []) if kid.job_id not in seen]
        for kid in kids:
            _merge(row.totals, walk(kid, depth + 1))
        if depth and not kids:
            rows.pop()  # a leaf under a root (the last row): its totals are in its parent's row
        return row.totals

    for root in children.get(None, []):
        walk(root, 0)
    for record in sorted(chosen.values(), key=lambda r: (r.submitted_at, r.job_id)):
        if record.job_id not in seen:  # in a cycle of parents (hand-published): it heads a tree of its own
            walk(record, 0)
    return rows


def _merge(into: Totals, other: Totals) -> None:
    into.jobs += other.jobs
    into.reporting += other.reporting
    if other.cost_usd is not None:
        into.cost_usd = round((into.cost_usd or 0.0) + other.cost_usd, 9)
    into.input_tokens = _plus(into.input_tokens, other.input_tokens)
    into.cached_input_tokens = _plus(into.cached_input_tokens, other.cached_input_tokens)
    into.output_tokens = _plus(into.output_tokens, other.output_tokens)
    into.turns = _plus(into.turns, other.turns)


def group(records: Iterable[JobRecord], by: By) -> list[Group]:
    if by == "parent":
        return by_tree(records)
    if by == "session":
        return by_key(records, lambda r: r.agent_session or NO_SESSION)
    return by_key(records, lambda r: r.agent)


__all__ = ["BY", "By", "Group", "Totals", "by_key", "by_tree", "cost_of", "group", "money", "total", "usage_of"]
