"""Tree budgets: a root's `tree_budget_usd` / `tree_budget_tokens` bound what the jobs under it may spend.

Pure functions over records (no clock, no I/O), used by the projector
(docs/design/runners.md, Budgets). What a tree has spent is the usage recorded by the
jobs under the root (its descendants by `parent` links, finished ones
included; the root's own usage is not counted: it is the one deciding what to
delegate). Once that reaches a budget:

- a new submit under the root (at any depth) is refused with a reason naming
  the root, the budget and what was spent (`refusal`);
- every unfinished job under it gets a derived `cancel_requested` whose reason
  says the same (`derive`); the runners stop them and record the usage their
  streams reported so far.

The root itself is not cancelled: it learns of the budget from the refusals
and may finish its own work. Usage is known when a job ends (its terminal
event carries it), so a tree can pass its budget by what the jobs running at
that moment spend before they are stopped: give each child a per-job budget
(`--budget-tokens`) too for a tighter bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mam.contract import events as ev
from mam.contract.job_limits import given, money, tokens
from mam.contract.record import JobRecord
from mam.contract.usage import usage_of

Lookup = Callable[[str], JobRecord | None]
TreeOf = Callable[[str], Mapping[str, Iterable[str]]]
"""A budgeted job's id -> each parent's children, complete for the tree under it (finished jobs too)."""
MAX_CHAIN = 1_000
"""A parent chain longer than this (a hand-published cycle, say) is not followed further."""
REASON_MAX = 256


@dataclass(frozen=True)
class Spent:
    tokens: int = 0
    cost_usd: float = 0.0


def budgeted(record: JobRecord) -> bool:
    return given(record, "tree_budget_tokens") is not None or given(record, "tree_budget_usd") is not None


def ancestors(parent: str | None, lookup: Lookup) -> list[JobRecord]:
    """The records up the chain from `parent` (itself first) to its root; unknown ones end the chain."""
    chain: list[JobRecord] = []
    seen: set[str] = set()
    while parent is not None and parent not in seen and len(chain) < MAX_CHAIN:
        seen.add(parent)
        record = lookup(parent)
        if record is None:
            break
        chain.append(record)
        parent = record.parent
    return chain


def spent(root: str, children: Mapping[str, Iterable[str]], lookup: Lookup) -> Spent:
    """The usage recorded by every job under `root` (`children`: each job's children, finished ones too)."""
    total_tokens, total_cost = 0, 0.0
    seen = {root}
    todo = list(children.get(root, ()))
    while todo:
        job = todo.pop()
        if job in seen:
            continue
        seen.add(job)
        todo.extend(children.get(job, ()))
        record = lookup(job)
        usage = usage_of(record) if record is not None else None
        total_tokens += tokens(usage) or 0
        total_cost += (usage.cost_usd or 0.0) if usage is not None else 0.0
    return Spent(total_tokens, round(total_cost, 9))


def reached(root: JobRecord, used: Spent) -> str | None:
    """Why the tree under `root` may spend no more, or None."""
    limit_tokens, limit_usd = given(root, "tree_budget_tokens"), given(root, "tree_budget_usd")
    if isinstance(limit_tokens, int) and used.tokens >= limit_tokens:
        return f"tree budget of {root.job_id} reached: {used.tokens} of {limit_tokens} tokens used"
    if isinstance(limit_usd, float) and used.cost_usd >= limit_usd:
        return f"tree budget of {root.job_id} reached: {money(used.cost_usd)} of {money(limit_usd)} spent"
    return None


def refusal(job_id: str, parent: str | None, tree_of: TreeOf, lookup: Lookup) -> str | None:
    """The reason to refuse a submit of `job_id` under `parent`, or None."""
    for ancestor in ancestors(parent, lookup):
        if budgeted(ancestor) and (why := reached(ancestor, spent(ancestor.job_id, tree_of(ancestor.job_id), lookup))):
            return f"{why}; no new jobs under it (job {job_id!r} refused)"[:REASON_MAX]
    return None


def derive(changed: Iterable[JobRecord], tree_of: TreeOf, lookup: Lookup) -> list[tuple[str, ev.AnyEvent]]:
    """The cancel requests the `changed` records call for: a job that ended with usage under a budgeted
    ancestor whose tree has now reached its budget cancels every unfinished job under that ancestor."""
    checked: set[str] = set()
    derived: list[tuple[str, ev.AnyEvent]] = []
    for record in changed:
        if not record.status.terminal or usage_of(record) is None or record.parent is None:
            continue
        for ancestor in ancestors(record.parent, lookup):
            if ancestor.job_id in checked or not budgeted(ancestor):
                continue
            checked.add(ancestor.job_id)
            children = tree_of(ancestor.job_id)
            why = reached(ancestor, spent(ancestor.job_id, children, lookup))
            if why is not None:
                derived += [
                    (job, ev.CancelRequested(reason=why[:REASON_MAX]))
                    for job in _unfinished_under(ancestor.job_id, children, lookup)
                ]
    return derived


def _unfinished_under(root: str, children: Mapping[str, Iterable[str]], lookup: Lookup) -> list[str]:
    found: list[str] = []
    seen = {root}
    todo = sorted(children.get(root, ()))
    while todo:
        job = todo.pop(0)
        if job in seen:
            continue
        seen.add(job)
        todo.extend(sorted(children.get(job, ())))
        record = lookup(job)
        if record is not None and not record.status.terminal and record.cancel_requested_at is None:
            found.append(job)
    return found


__all__ = ["Spent", "ancestors", "budgeted", "derive", "reached", "refusal", "spent"]
