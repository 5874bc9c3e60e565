"""Validation of the ids that become topic segments and file names."""

from __future__ import annotations

import re
from typing import Final

from mam.errors import InvalidId

WORKSPACE_ID_PATTERN: Final = r"^[A-Za-z0-9._-]{1,64}$"
JOB_ID_PATTERN: Final = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"
AGENT_ID_PATTERN: Final = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"

_WORKSPACE_ID = re.compile(WORKSPACE_ID_PATTERN)
_JOB_ID = re.compile(JOB_ID_PATTERN)
_AGENT_ID = re.compile(AGENT_ID_PATTERN)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def validate_workspace_id(value: str) -> str:
    """Return `value` if it is a legal workspace id, else raise `InvalidId`."""
    if not _WORKSPACE_ID.fullmatch(value) or value in {".", ".."}:
        raise InvalidId(
            f"invalid workspace id {_shown(value)}: use 1-64 of A-Z a-z 0-9 . _ - "
            "(no '/', no wildcards, not '.' or '..')"
        )
    return value


def validate_job_id(value: str) -> str:
    """Return `value` if it is a legal job id, else raise `InvalidId`."""
    if not _JOB_ID.fullmatch(value):
        raise InvalidId(f"invalid job id {_shown(value)}: use 1-128 of A-Z a-z 0-9 . _ - , not starting with '.'")
    return value


def validate_agent_id(value: str) -> str:
    """Return `value` if it is a legal agent (runner) id, else raise `InvalidId`."""
    if not _AGENT_ID.fullmatch(value):
        raise InvalidId(f"invalid agent id {_shown(value)}: use 1-128 of A-Z a-z 0-9 . _ - , not starting with '.'")
    return value


def is_job_id(value: str) -> bool:
    return _JOB_ID.fullmatch(value) is not None
