"""The forms of a job id that shell completion offers: the whole id, or the short id people see.

A generated id (`job-20261204-120000-5732ef`, `mam.agents.publisher.new_job_id`) is shown by its short id,
its random suffix (`5732ef`): in messages, `mam jobs` and the dashboard (web/static/ids.js, `shortId`);
the CLI takes it for the id (`mam show 5732ef`, `mam.registry.query.resolve_job_id`). Completion offers
what resolves to one job there: for a word that starts a short id, that short id (its whole id as the
description zsh and fish show); for a word that starts an id, the id. Every offer starts with the word
typed, so zsh's and fish's own filtering keeps it, and bash inserts it as it is.

A short id that would not resolve to its job (two ids end with it, or an id starts with it or is it)
is not offered: that job is offered by its whole id.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

SHORT: Final = 6
"""Characters of a generated id's short id."""

GENERATED: Final = re.compile(rf"job-\d{{8}}-\d{{6}}-([0-9a-f]{{{SHORT}}})")
"""A generated job id; its group is the short id."""


def short_id(job_id: str) -> str | None:
    """The short id of a generated `job_id`; None for any other id (shown whole)."""
    found = GENERATED.fullmatch(job_id)
    return found.group(1) if found else None


def id_forms(ids: Iterable[str], typed: str) -> dict[str, str]:
    """What completes `typed` among the job `ids`: each offer (starting with `typed`) with its description
    (the whole id for a short id, else nothing). With nothing typed, each job once, by its short id where it
    has a usable one; with a word typed, also the whole ids that start with it."""
    known = list(ids)
    ends = Counter(job[-SHORT:] for job in known)
    starts = Counter(job[:SHORT] for job in known)  # an id that starts with (or is) a short id wins over it
    offers: dict[str, str] = {}
    for job in known:
        short = short_id(job)
        usable = short is not None and ends[short] == 1 and starts[short] == 0
        if usable and short is not None and short.startswith(typed):
            offers[short] = job
        if job.startswith(typed) and (typed or not usable):
            offers.setdefault(job, "")
    return offers


def listed_forms(ids: Iterable[str], typed: str) -> dict[str, str]:
    """`id_forms` for the last of comma-separated ids (`--after a1b2c3,57`): each offer is the list so far
    with one more id that is not in it yet."""
    done, _sep, last = typed.rpartition(",")
    given = set(done.split(",")) if done else set()
    head = f"{done}," if done else ""
    return {head + form: about for form, about in id_forms(ids, last).items() if form not in given}


__all__ = ["GENERATED", "SHORT", "id_forms", "listed_forms", "short_id"]
