"""Names a front end did not expect, in mam's words: an unknown field, argument or flag with the nearest known
name (`unknown argument 'job_timout' for submit_job; did you mean 'job_timeout'? known: ...`), and every required
one left out at once. `mam.contract.value_words` says what is wrong with a value; this, with a name.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Final, Literal

Front = Literal["cli", "python", "api", "mcp"]

DOCS: Final[dict[Front, str]] = {
    "cli": "docs/cli.md",
    "python": "docs/cli.md#python-api",
    "api": "docs/api.md",
    "mcp": "docs/mcp.md",
}
"""Where each front end's options are read about."""


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` was likely meant to be: a close spelling (`job_timout`), or one it begins (`tail` for
    `tail_bytes`, `agent_name` for `agent`); None when none is close (`bogus`)."""
    choices = list(known)
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.75)
    if close:
        return close[0]
    starts = [c for c in choices if len(min(c, name, key=len)) >= 4 and (c.startswith(name) or name.startswith(c))]
    return starts[0] if len(starts) == 1 else None


def unknown(given: Iterable[str], known: Iterable[str], *, kind: str = "field", of: str | None = None) -> str:
    """`unknown argument 'job_timout' for submit_job; did you mean 'job_timeout'? known: prompt, agent, ...`:
    every unknown name, the nearest known one for each that has one, and the known ones."""
    names, choices = list(given), list(known)
    near = {n: m for n in names if (m := nearest(n, choices))}
    where = f" for {of}" if of else ""
    if len(names) == 1:
        hint = f"; did you mean '{near[names[0]]}'?" if names[0] in near else ";"
        head = f"unknown {kind} {_quoted(names)}{where}{hint}"
    else:
        each = ", ".join(f"'{n}'" + (f" (did you mean '{near[n]}'?)" if n in near else "") for n in names)
        head = f"unknown {kind}s {each}{where};"
    return f"{head} known: {', '.join(choices)}"


def missing(
    names: Iterable[str],
    front: Front,
    *,
    kind: str = "field",
    of: str | None = None,
    flags: Mapping[str, str | None] | None = None,
) -> str:
    """`missing required fields: prompt, agent (see docs/api.md)`: every one left out, at once."""
    shown_names = [(flags or {}).get(n) or n if front == "cli" else n for n in names]
    plural = "s" if len(shown_names) > 1 else ""
    where = f" for {of}" if of else ""
    return f"missing required {kind}{plural}{where}: {', '.join(shown_names)} (see {DOCS[front]})"
