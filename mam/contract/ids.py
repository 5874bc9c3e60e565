"""Validation of the ids that become topic segments and file names.

Every id starts with a letter or a digit. Names that start with `.`, `_` or
`-` are the projector's own (`_rejected.jsonl`, `.projector.lock`,
`.projector.dirty`, `.<record>.tmp`) or read as options on a command line
(`--help`), so no job, agent or workspace can ever be named like one.
"""

from __future__ import annotations

import re
from typing import Final

from mam.contract.errors import InvalidId

END: Final = r"$(?!\n)"
"""The end of a whole-string pattern. Python's `$` also matches before a trailing newline, so
msgspec (which searches with `re`) would take `"agent\n"` for `"agent"`; the lookahead refuses it
and reads the same in ECMA-262, where JSON Schema validators in other languages apply the
patterns of `mam schema`."""

WORKSPACE_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}" + END
JOB_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}" + END
AGENT_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}" + END

ID_RULE: Final = "starting with a letter or digit"
"""What the patterns above say beyond their length, for error messages."""

_WORKSPACE_ID = re.compile(WORKSPACE_ID_PATTERN)
_JOB_ID = re.compile(JOB_ID_PATTERN)
_AGENT_ID = re.compile(AGENT_ID_PATTERN)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def validate_workspace_id(value: str) -> str:
    """Return `value` if it is a legal workspace id, else raise `InvalidId`."""
    if not _WORKSPACE_ID.fullmatch(value):
        raise InvalidId(
            f"invalid workspace id {_shown(value)}: use 1-64 of A-Z a-z 0-9 . _ - , {ID_RULE} (no '/', no wildcards)"
        )
    return value


def validate_job_id(value: str) -> str:
    """Return `value` if it is a legal job id, else raise `InvalidId`."""
    if not _JOB_ID.fullmatch(value):
        raise InvalidId(f"invalid job id {_shown(value)}: use 1-128 of A-Z a-z 0-9 . _ - , {ID_RULE}")
    return value


def validate_agent_id(value: str) -> str:
    """Return `value` if it is a legal agent (runner) id, else raise `InvalidId`."""
    if not _AGENT_ID.fullmatch(value):
        raise InvalidId(f"invalid agent id {_shown(value)}: use 1-128 of A-Z a-z 0-9 . _ - , {ID_RULE}")
    return value


def is_job_id(value: str) -> bool:
    return _JOB_ID.fullmatch(value) is not None
