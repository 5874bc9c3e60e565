"""Text from outside made safe to print: control characters and bidi overrides shown, never obeyed.

A prompt, a result, an error, a topic, a client id or a user name may hold ESC, BEL or other control
characters, or the Unicode controls that reorder the text around them (U+202E RIGHT-TO-LEFT OVERRIDE
makes `exe.txt` read `txt.exe`), by accident or planted to rewrite the reader's terminal or to forge a
line of a log. The human forms of `mam jobs`, `mam show`, `mam events` and the tree, mam's own lines that
quote such text, and every log line of mam's processes (`mam.process.running.LogFormatter`) print them escaped: `\\x1b`,
`\\u202e`; `--json` escapes them by being JSON. The dashboard does the same in the page (web/static/dom.js,
`visible`).

Escaped: C0 controls (U+0000-001F, but tab and newline with `keep_layout`), DEL and C1 (U+007F-009F),
the bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069), the implicit marks (U+200E, U+200F,
U+061C), and the line and paragraph separators (U+2028, U+2029). A backslash is not escaped: the escapes
are for a person to read, and `--json` has the exact text.
"""

from __future__ import annotations

import re

_UNICODE_CONTROLS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
"""Not in C0 or C1, but as able to mislead a reader: the bidi controls and the line separators."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_UNICODE_CONTROLS}]")
_CONTROL_AND_LAYOUT = re.compile(f"[\x00-\x1f\x7f-\x9f{_UNICODE_CONTROLS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, *, keep_layout: bool = True) -> str:
    """`text` with control characters written as `\\xNN` and bidi controls as `\\uNNNN`; newlines and
    tabs kept if `keep_layout`."""
    pattern = _CONTROL if keep_layout else _CONTROL_AND_LAYOUT
    return pattern.sub(_escape, text)


def short(text: str | None, width: int = 48) -> str:
    """`text` on one line, made `safe`, cut to `width` characters with `...` (a listing's cell)."""
    text = safe(" ".join((text or "").split()), keep_layout=False)
    return text if len(text) <= width else text[: width - 3] + "..."
