"""Timestamps as mam writes them: ISO 8601, UTC, milliseconds, `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: datetime) -> str:
    if moment.tzinfo is UTC:  # the common case (`utc_now`): no conversion to do
        return moment.isoformat(timespec="milliseconds")[:-6] + "Z"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_now() -> datetime:
    return datetime.now(UTC)


def utc_now_iso() -> str:
    return iso(utc_now())
