"""Text from records made safe to print: control characters shown, never obeyed.

A prompt, a result or an error may hold ESC, BEL or other control characters
(by accident, or planted to rewrite the reader's terminal). The human forms of
`mam jobs`, `mam show`, `mam events` and the tree print them escaped (`\\x1b`);
`--json` escapes them by being JSON.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_AND_LAYOUT = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def safe(text: str, *, keep_layout: bool = True) -> str:
    """`text` with control characters written as `\\xNN`; newlines and tabs kept if `keep_layout`."""
    pattern = _CONTROL if keep_layout else _CONTROL_AND_LAYOUT
    return pattern.sub(_escape, text)


def short(text: str | None, width: int = 48) -> str:
    """`text` on one line, made `safe`, cut to `width` characters with `...` (a listing's cell)."""
    text = safe(" ".join((text or "").split()), keep_layout=False)
    return text if len(text) <= width else text[: width - 3] + "..."
