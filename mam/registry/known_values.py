"""What a workspace's registry knows, for shell completion: job ids, agents, sessions, labels, and the
runner labels, roles and models jobs asked for.

Read from files only, never the broker (a completion is answered while the user waits at the prompt):
the ids are the registry's file names; agents, sessions and labels come from the query index when it is
current, else from at most `MOST_READ` records (a stale index on a large workspace still answers fast);
what the index has no column for (`require`, `role`, `model`) always from at most `MOST_READ` records.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Final, TypeVar

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.index import IndexReader
from mam.registry.reading import iter_records, job_ids

MOST_READ: Final = 2_000
"""Records read without a current index (the values of the jobs beyond them are not offered)."""

T = TypeVar("T")


def known_job_ids(workspace: Workspace, prefix: str = "") -> list[str]:
    """The registry's job ids that start with `prefix`, A to Z."""
    return [job for job in job_ids(workspace) if job.startswith(prefix)]


def known_agents(workspace: Workspace) -> list[str]:
    """The agents the workspace's jobs were submitted for, A to Z."""
    from_index = _from_index(workspace, lambda reader: reader.distinct("agent"))
    return from_index if from_index is not None else sorted({r.agent for r in _some_records(workspace)})


def known_sessions(workspace: Workspace) -> list[str]:
    """The agent sessions of the workspace's jobs, A to Z."""
    from_index = _from_index(workspace, lambda reader: reader.distinct("agent_session"))
    if from_index is not None:
        return from_index
    return sorted({r.agent_session for r in _some_records(workspace) if r.agent_session})


def known_labels(workspace: Workspace) -> list[str]:
    """Every `key=value` label of the workspace's jobs, A to Z."""
    pairs = _from_index(workspace, lambda reader: reader.label_pairs())
    if pairs is None:
        pairs = sorted({(k, v) for r in _some_records(workspace) for k, v in r.labels.items()})
    return [f"{key}={value}" for key, value in pairs]


def known_requirements(workspace: Workspace) -> list[str]:
    """Every `key=value` runner label the workspace's jobs required (`mam submit --require`), A to Z."""
    pairs = {(k, v) for r in _some_records(workspace) if isinstance(r.require, dict) for k, v in r.require.items()}
    return [f"{key}={value}" for key, value in sorted(pairs)]


def known_roles(workspace: Workspace) -> list[str]:
    """The roles of the workspace's jobs, A to Z."""
    return sorted({r.role for r in _some_records(workspace) if r.role})


def known_models(workspace: Workspace) -> list[str]:
    """The models the workspace's jobs asked for (`mam submit --model`), A to Z."""
    return sorted({r.model for r in _some_records(workspace) if isinstance(r.model, str)})


def _from_index(workspace: Workspace, ask: Callable[[IndexReader], T]) -> T | None:
    """`ask(reader)` on a current query index, or None without one (missing, stale, unreadable)."""
    reader = IndexReader.open(workspace.registry_dir)
    if reader is None:
        return None
    with reader:
        try:
            return ask(reader)
        except sqlite3.DatabaseError:
            return None


def _some_records(workspace: Workspace) -> Iterator[JobRecord]:
    return islice(iter_records(workspace), MOST_READ)


__all__ = [
    "MOST_READ",
    "known_agents",
    "known_job_ids",
    "known_labels",
    "known_models",
    "known_requirements",
    "known_roles",
    "known_sessions",
]
