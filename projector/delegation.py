"""Delegation guards: how deep and how wide one job may delegate, and no cycles.

Limits come from `<workspace>/.mam/config.json` (`max_depth`, `max_children`);
the defaults stop a runaway agent that keeps delegating to itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mam.contract.errors import UsageError
from mam.contract.record import JobRecord

CONFIG_NAME = "config.json"


@dataclass(frozen=True, slots=True)
class DelegationLimits:
    max_depth: int = 8
    max_children: int = 32


def load_limits(workspace_root: Path) -> DelegationLimits:
    path = workspace_root / ".mam" / CONFIG_NAME
    if not path.is_file():
        return DelegationLimits()
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        default = DelegationLimits()  # a slotted dataclass: its class attributes are descriptors, not defaults
        limits = DelegationLimits(
            max_depth=int(data.get("max_depth", default.max_depth)),
            max_children=int(data.get("max_children", default.max_children)),
        )
    except (OSError, ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise UsageError(f'{path}: {exc}; expected {{"max_depth": N, "max_children": N}}') from None
    if limits.max_depth < 1 or limits.max_children < 1:
        raise UsageError(f"{path}: max_depth and max_children must be at least 1")
    return limits


def check(
    job_id: str,
    parent: str,
    lookup: Callable[[str], JobRecord | None],
    open_children: int,
    limits: DelegationLimits,
) -> str | None:
    """The reason to refuse a submit of `job_id` under `parent`, or None."""
    if parent == job_id:
        return f"job {job_id!r} cannot be its own parent (a delegation cycle)"
    chain = [job_id]
    current: str | None = parent
    while current is not None:
        if current in chain:
            return f"delegation cycle: {' -> '.join([*chain, current])}"
        record = lookup(current)
        if record is None:
            return f"unknown parent job {current!r}: submit the parent first"
        chain.append(current)
        if len(chain) - 1 > limits.max_depth:
            return (
                f"delegation too deep: {job_id!r} would be at depth {len(chain) - 1} under "
                f"{' -> '.join(reversed(chain[1:]))}; max_depth is {limits.max_depth}"
            )
        current = record.parent
    if open_children >= limits.max_children:
        return f"parent {parent!r} already has {open_children} open children; max_children is {limits.max_children}"
    return None
