"""Routing: runner labels, the labels a job requires, and its priority.

Pure helpers (no I/O) shared by the CLI (`mam-agent --label`, `mam submit --require/--priority`), the fold
(the record keeps `require` and `priority`), the projector's dispatch and claim check, and presence (`mam
submit`/`mam show` say when no runner online has what a job requires). A requirement is a `key=value` pair;
a runner satisfies a job when every pair the job requires is among the runner's labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from msgspec import UnsetType

from mam.contract import events as ev
from mam.contract.errors import UsageError
from mam.contract.record import JobRecord

FIELDS: Final = ("require", "priority")
"""The `submitted` fields the record keeps under the same names (and `mam retry` carries over)."""
KEY_PATTERN: Final = re.compile(r"[A-Za-z0-9._/-]{1,64}")


def parse_pairs(values: Iterable[str] | None, flag: str) -> dict[str, str]:
    """`["gpu=a100", "os=linux"]` from a repeatable `--label`/`--require`; a malformed one is a usage error."""
    pairs: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not KEY_PATTERN.fullmatch(key) or len(val) > 256:
            raise UsageError(
                f"{flag} {value!r}: expected key=value, a key of letters, digits and ._/- "
                "(at most 64) and a value of at most 256 characters"
            )
        if key in pairs and pairs[key] != val:
            raise UsageError(f"{flag} {value!r}: {key!r} is already given as {key}={pairs[key]}")
        pairs[key] = val
    return pairs


def check_priority(priority: int | None, flag: str = "--priority") -> int | None:
    if priority is not None and not ev.MIN_PRIORITY <= priority <= ev.MAX_PRIORITY:
        raise UsageError(f"{flag} {priority}: a priority is an integer from {ev.MIN_PRIORITY} to {ev.MAX_PRIORITY}")
    return priority


def submit_fields(require: Mapping[str, str] | None, priority: int | None) -> dict[str, object]:
    """The `Submitted` keyword arguments for them: none when not given (the event keeps its bytes)."""
    fields: dict[str, object] = {}
    if require:
        fields["require"] = dict(sorted(require.items()))
    if priority is not None and check_priority(priority) != 0:
        fields["priority"] = priority
    return fields


def from_submit(event: ev.Submitted) -> dict[str, object]:
    """The record's keys for the routing fields the submit gave (none for those it left out)."""
    fields: dict[str, object] = {}
    if isinstance(event.require, dict) and event.require:
        fields["require"] = dict(sorted(event.require.items()))
    if isinstance(event.priority, int) and event.priority != 0:
        fields["priority"] = event.priority
    return fields


def of_record(record: JobRecord) -> dict[str, object]:
    """The `submitted` fields that route a new job (`mam retry`) as `record` was."""
    return {name: value for name in FIELDS if not isinstance(value := getattr(record, name), UnsetType)}


def required(record: JobRecord) -> dict[str, str]:
    return record.require if isinstance(record.require, dict) else {}


def priority(record: JobRecord) -> int:
    return record.priority if isinstance(record.priority, int) else 0


def missing(labels: Mapping[str, str] | None, require: Mapping[str, str]) -> list[str]:
    """The required `key=value` pairs a runner with `labels` lacks (empty: it satisfies them)."""
    have = labels or {}
    return [f"{key}={value}" for key, value in sorted(require.items()) if have.get(key) != value]


def describe(pairs: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(pairs.items()))


__all__ = [
    "FIELDS",
    "check_priority",
    "describe",
    "from_submit",
    "missing",
    "of_record",
    "parse_pairs",
    "priority",
    "required",
    "submit_fields",
]
