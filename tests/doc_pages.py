"""The project's pages (README.md, docs/*.md and docs/design/*.md) as the doc tests read them: fenced blocks with their
language and line, headings as GitHub anchors them, relative links and images, and the commands in
shell blocks split into argv lists the way a shell would split them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
PAGES = [
    CHECKOUT / "README.md",
    *sorted((CHECKOUT / "docs").glob("*.md")),
    *sorted((CHECKOUT / "docs" / "design").glob("*.md")),
]
"""The README, docs/*.md and the design's part pages (docs/design/*.md)."""

SHELL_LANGUAGES = {"sh", "bash"}
"""Blocks in these languages hold commands to type; every other block (json, python, text, none) is shown."""

_FENCE = re.compile(r"^( *)```([\w+-]*)[^\n]*\n(.*?)^\1```", re.S | re.M)
"""A fenced block, also one indented under a list item (its lines carry the fence's indent)."""
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$", re.M)
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)\)")
_INLINE_CODE = re.compile(r"(`+).*?\1", re.S)
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}
_VARIABLE = re.compile(r"\$\{?[A-Za-z_]\w*\}?")

FIXED_ID = "job-20260101-120000-abc123"
"""What a shell variable in a command (`"$job"`) stands for: a job id, the one value the pages put in one."""


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int
    """The page's line number of the block's first line (the one after the fence)."""


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    source: str
    argv: list[str]


def relative(page: Path) -> str:
    return str(page.relative_to(CHECKOUT))


def blocks(text: str) -> Iterator[Block]:
    for match in _FENCE.finditer(text):
        indent = len(match.group(1))
        body = "".join(line[indent:] if line[:indent].isspace() else line for line in match.group(3).splitlines(True))
        yield Block(match.group(2), body, text.count("\n", 0, match.start(3)) + 1)


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code, where a `[x](y)` is no link; lines are kept."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _INLINE_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor the page's headings make (a repeated heading gets -1, -2, ... as on GitHub)."""
    made: set[str] = set()
    counts: dict[str, int] = {}
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        base = slug(match.group(2))
        count = counts.get(base, 0)
        counts[base] = count + 1
        made.add(base if count == 0 else f"{base}-{count}")
    return made


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and image outside code."""
    body = prose(text)
    for match in _LINK.finditer(body):
        yield body.count("\n", 0, match.start()) + 1, match.group(1)


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The block's lines with backslash continuations joined, each with its page line number."""
    pending, start = "", 0
    for offset, raw in enumerate(block.text.splitlines()):
        if not pending:
            start = block.line + offset
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        yield start, pending + raw
        pending = ""
    if pending:
        yield start, pending


def _simple_commands(line: str) -> Iterator[str]:
    """The commands a shell line runs: each `$(...)` on its own, then the line around them."""
    yield from _SUBSTITUTION.findall(line)
    yield _SUBSTITUTION.sub("SUBSTITUTED", line)


def _split(command: str) -> Iterator[list[str]]:
    """Words of each command of a pipeline or list, redirections and leading assignments left out."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    skip_next = False
    for token in lexer:
        if skip_next:
            skip_next = False
        elif token in _OPERATORS:
            yield words
            words = []
        elif token[0] in "<>":
            if words and words[-1].isdigit():
                words.pop()  # the 2 of 2>/dev/null
            skip_next = True  # the file it names
        else:
            words.append(FIXED_ID if _VARIABLE.fullmatch(token) else token)
    yield words


def commands(page: Path, programs: set[str]) -> Iterator[Command]:
    """Every invocation of one of `programs` (by the basename of the first word) in the page's shell blocks."""
    for block in blocks(page.read_text(encoding="utf-8")):
        if block.language not in SHELL_LANGUAGES:
            continue
        for line_number, line in _logical_lines(block):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            for simple in _simple_commands(line):
                for words in _split(simple):
                    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
                        words = words[1:]
                    if words and Path(words[0]).name in programs:
                        yield Command(page, line_number, line.strip(), words)
