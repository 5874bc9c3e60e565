"""Times for people: ages (`3m ago`), durations (`1h12m`), and `--since 2h|ISO` read back.

Pure functions over ISO 8601 strings as the records hold them; `--json` keeps
those strings, only tables use these forms.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
MAX_DURATION = 36_500 * 86400
"""The longest duration mam reads (100 years): longer ones overflow the time arithmetic (and mean nothing)."""


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time as the records write it (`...Z`), aware, in UTC; None if absent or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def span(seconds: float) -> str:
    """A duration in at most two units: `42s`, `3m05s`, `1h12m`, `2d3h`."""
    total = max(int(seconds), 0)
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if minutes < 10 and secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def ago(text: str | None, now: datetime) -> str:
    """`3m ago` for an ISO time; `-` when there is none."""
    moment = parse_time(text)
    if moment is None:
        return "-"
    seconds = (now - moment).total_seconds()
    return "just now" if seconds < 1 else f"{span(seconds)} ago"


def between(start: str | None, end: str | None, now: datetime) -> str:
    """How long from `start` to `end` (to `now` while `end` is None); `-` before `start`."""
    begun = parse_time(start)
    if begun is None:
        return "-"
    finished = parse_time(end) or now
    return span((finished - begun).total_seconds())


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `1h30m`, `90s`, `2w` (or `0s`) as seconds; ValueError naming the text otherwise."""
    compact = text.strip().lower()
    if not compact or _SPAN.sub("", compact) != "":
        raise ValueError(f"{text!r} is not a duration: use a number and a unit (s, m, h, d, w), e.g. 30d, 12h, 1h30m")
    return _bounded(text, sum(float(n) * _UNITS[unit] for n, unit in _SPAN.findall(compact)))


def _bounded(text: str, seconds: float) -> float:
    if not seconds <= MAX_DURATION:
        raise ValueError(f"{text!r} is too long a duration: at most 36500d (100 years)")
    return seconds


def parse_since(text: str, now: datetime) -> datetime:
    """`30m`, `2h`, `1d`, `1h30m` (that long before `now`) or an ISO 8601 time; ValueError if neither.

    An ISO time without a zone is taken as UTC, like every time mam writes."""
    compact = text.strip().lower()
    if compact and _SPAN.sub("", compact) == "":
        seconds = _bounded(text, sum(float(n) * _UNITS[unit] for n, unit in _SPAN.findall(compact)))
        return now - timedelta(seconds=seconds)
    moment = parse_time(text.strip())
    if moment is None:
        raise ValueError(f"{text!r} is neither a duration (30m, 2h, 1d) nor an ISO time (2026-05-01T12:00Z)")
    return moment


__all__ = ["MAX_DURATION", "ago", "between", "parse_duration", "parse_since", "parse_time", "span"]
