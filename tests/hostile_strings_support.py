"""Client-chosen strings for the tests that show them escaped: what must never reach a log, a terminal or
the dashboard raw (`HIDDEN`), and hypothesis strategies that make strings holding it."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

HIDDEN = frozenset(map(chr, [*range(0x20), *range(0x7F, 0xA0)])) | frozenset(
    "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""What must never reach a log raw: C0 and C1 controls, DEL, bidi controls, line and paragraph separators."""
FORGED = "\nmam: forged\x1b[2J\x1b]0;title\x07\u202eexe.txt\r"
"""A client's attempt at a line of its own in the operator's log, with the screen cleared and the text reversed."""


def raw_in(text: str) -> set[str]:
    """The characters of HIDDEN in `text` but the newlines that end its lines."""
    return {ch for ch in text if ch in HIDDEN and ch != "\n"}


def hostile(exclude: str = "") -> st.SearchStrategy[str]:
    """Short strings holding at least one character of HIDDEN (but `exclude`), none of MQTT's `\\0 / + #`."""
    hidden = st.sampled_from(sorted(HIDDEN - set(exclude) - {"\x00"}))
    other = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/+#" + exclude), max_size=3)
    return (
        st.lists(hidden | other, min_size=1, max_size=6)
        .map("".join)
        .filter(lambda text: any(ch in HIDDEN for ch in text))
    )


def generated(at: int, count: int, strategy: st.SearchStrategy[str]) -> list[str]:
    """Up to `count` distinct strings of `strategy`, the same for the same `at`."""
    found: list[str] = []

    @seed(at)
    @settings(max_examples=count, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(text=strategy)
    def draw(text: str) -> None:
        if text not in found:
            found.append(text)

    draw()
    return found
