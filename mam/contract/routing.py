"""Routing: runner labels, the labels a job requires, and its rank in the queue.

Pure helpers (no I/O) shared by the CLI (`mam-agent --label`, `mam submit --require`), the projector's
dispatch and claim check, and presence (`mam submit`/`mam show` say when no runner online has what a job
requires); the record keeps a job's options as `mam.contract.job_options` copies them. A requirement is a
`key=value` pair; a runner satisfies a job when every pair the job requires is among the runner's labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from mam.contract.errors import UsageError
from mam.contract.record import JobRecord, rank

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


def required(record: JobRecord) -> dict[str, str]:
    return record.require if isinstance(record.require, dict) else {}


def missing(labels: Mapping[str, str] | None, require: Mapping[str, str]) -> list[str]:
    """The required `key=value` pairs a runner with `labels` lacks (empty: it satisfies them)."""
    have = labels or {}
    return [f"{key}={value}" for key, value in sorted(require.items()) if have.get(key) != value]


def describe(pairs: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(pairs.items()))


__all__ = ["describe", "missing", "parse_pairs", "rank", "required"]
