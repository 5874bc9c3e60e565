"""Forgiving agent names: the known names nearest to one that matches nothing.

A job's agent name is the queue it waits in; a name no runner serves and no
profile has strands it. `mam submit` and `mam-agent` name the nearest known
names (profiles, their aliases, agents online) so the user can fix the typo
or declare an alias (`.mam/profiles.json`: `{"claude": {"alias": "claude-code"}}`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(name: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """Known names that start with `name` or it with them (`claude` → `claude-code`), then the closest
    by spelling; at most `limit`, best first, `name` itself never."""
    names = sorted({k for k in known if k != name})
    lowered = name.lower()
    prefixed = [k for k in names if k.lower().startswith(lowered) or lowered.startswith(k.lower())]
    close = difflib.get_close_matches(name, names, n=limit, cutoff=0.6)
    found = [*prefixed, *(k for k in close if k not in prefixed)]
    return found[:limit]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean 'claude-code'?`, or '' when nothing is near."""
    found = nearest(name, known)
    if not found:
        return ""
    return "did you mean " + " or ".join(repr(k) for k in found) + "?"


__all__ = ["did_you_mean", "nearest"]
