"""The job this process runs inside: `MAM_JOB_ID`, which `mam-agent` sets in its agent's environment.

Every way to submit (`mam submit`, `Publisher.submit`, the MCP server's `submit_job`) takes it as the
default `parent`, so jobs an agent delegates through its shell tool build the same delegation tree as
those it submits over MCP: `mam cancel --tree`, `mam usage --by parent` and the cascade cover them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mam.contract.errors import UsageError
from mam.contract.ids import is_job_id

ENV = "MAM_JOB_ID"


def enclosing_job(env: Mapping[str, str] | None = None) -> str | None:
    """`$MAM_JOB_ID`, or None when it is unset or empty; a value that is no job id is a usage error
    naming it (a typo there would otherwise make a root job without a word)."""
    found = (os.environ if env is None else env).get(ENV) or None
    if found is not None and not is_job_id(found):
        raise UsageError(f"{ENV}={found!r} is not a job id; unset it, or pass --parent JOB or --no-parent")
    return found


def default_parent(parent: str | None, *, no_parent: bool = False, env: Mapping[str, str] | None = None) -> str | None:
    """The parent a submit records: the one given, else none when asked for a root (`--no-parent`),
    else the job this process runs inside."""
    if parent is not None:
        return parent
    return None if no_parent else enclosing_job(env)
