"""What `mam doctor` reports, and `mam-agent` checks at start: a list of named checks, each ok or not, with a fix.

A check's `name` is stable (`workspace.links`, `broker.reachable`,
`agent.gemini.cli`): scripts read `mam doctor --json` by it. Its `status`:
`ok`; `warn`, something that may bite (an untested CLI version, no
credentials found) but does not stop mam; `fail`, something mam or a runner
the user asked about needs and lacks; `skip`, not checked here (the CLI is
not installed, the broker cannot be asked). `detail` says what was found in
one line, never a secret's value; `fix` is one line saying what to do, for a
`warn` or `fail`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final, Literal

import msgspec

CheckStatus = Literal["ok", "warn", "fail", "skip"]
STATUSES: Final[tuple[CheckStatus, ...]] = ("ok", "warn", "fail", "skip")


class Check(msgspec.Struct, frozen=True, kw_only=True):
    """One item of the checklist."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None


def ok(name: str, detail: str) -> Check:
    return Check(name=name, status="ok", detail=detail)


def warn(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, status="warn", detail=detail, fix=fix)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, status="fail", detail=detail, fix=fix)


def skip(name: str, detail: str, fix: str | None = None) -> Check:
    return Check(name=name, status="skip", detail=detail, fix=fix)


def failed_or_warned(name: str, detail: str, fix: str, *, strict: bool) -> Check:
    """A `fail` where the user asked for the thing checked (`mam doctor --agent X`, a runner at start),
    else a `warn`: the same finding, but nothing configured here needs it."""
    return fail(name, detail, fix) if strict else warn(name, detail, fix)


def counts(checks: Iterable[Check]) -> dict[CheckStatus, int]:
    found = Counter(check.status for check in checks)
    return {status: found[status] for status in STATUSES}


def any_failed(checks: Iterable[Check]) -> bool:
    return any(check.status == "fail" for check in checks)


__all__ = ["STATUSES", "Check", "CheckStatus", "any_failed", "counts", "fail", "failed_or_warned", "ok", "skip", "warn"]
