"""The query index's position (`mam.registry.index`), and when an index is current.

Position. The registry's position is a token the projector keeps in its
dirty list (`<registry>/.projector.dirty`, see `mam.projector.repair`):
`#position=<generation>.<sequence>`, where the generation names one build of
the index and the sequence counts the batches that changed records. Every
batch that changes records writes the token with the next sequence (and the
jobs it touches) before it appends to any log, and the index commits the
same sequence with the batch's rows. The index is *current* when

- its schema is this mam's, and the dirty list carries a position token of
  the same generation;
- with no batch in flight (the dirty list names no job), its sequence equals
  the token's; with a batch in flight, a live projector holds the lock and
  the index's sequence is at least the token's minus one (that batch's rows
  are being committed: a reader sees what a reader of the JSON files would
  see mid-batch).

Anything else is *stale* and never trusted: an index written by another
schema, one whose generation is not the registry's (copied, restored), one
behind the token (a crash between the records and the index; an older mam
that writes records without the index drops the token, which is also stale),
a batch in flight with no live projector (a crash mid-batch). A stale or
missing index is rebuilt by the projector at its start; until then readers
bypass it and scan the JSON files, as they did before it existed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.registry.index_schema import SCHEMA_VERSION
from mam.registry.nofollow import PathRefused, read_beneath

DIRTY_NAME: Final = ".projector.dirty"
POSITION_PREFIX: Final = "#position="


# -- the position ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Position:
    generation: str
    sequence: int

    @property
    def token(self) -> str:
        return f"{POSITION_PREFIX}{self.generation}.{self.sequence}"

    def next(self) -> Position:
        return Position(self.generation, self.sequence + 1)


def parse_position(text: str) -> Position | None:
    """A `#position=<generation>.<sequence>` token, or `None` if it is not one."""
    if not text.startswith(POSITION_PREFIX):
        return None
    generation, _, sequence = text[len(POSITION_PREFIX) :].rpartition(".")
    if not generation or not sequence.isdigit():
        return None
    return Position(generation, int(sequence))


@dataclass(frozen=True, slots=True)
class DirtyState:
    """What the dirty list says: the registry's position, and whether a batch is in flight."""

    position: Position | None
    in_flight: bool


def parse_dirty(data: bytes) -> DirtyState:
    position, in_flight = None, False
    for token in data.decode("utf-8", errors="replace").split():
        found = parse_position(token)
        if found is not None:
            position = found
        else:
            in_flight = True
    return DirtyState(position, in_flight)


def read_dirty(registry_dir: Path) -> DirtyState:
    """The dirty list as it is now; a link or an unreadable file says nothing (stale)."""
    try:
        data = read_beneath(registry_dir, DIRTY_NAME)
    except (OSError, PathRefused):
        return DirtyState(None, True)
    return parse_dirty(data or b"")


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return {}


def staleness(meta: dict[str, str], dirty: DirtyState, live: bool) -> str | None:
    """Why an index with this meta cannot be trusted against this dirty list, or `None` if it is
    current (see this module's docstring)."""
    if meta.get("schema") != str(SCHEMA_VERSION):
        return f"schema {meta.get('schema', 'unknown')}, not {SCHEMA_VERSION}"
    if dirty.position is None:
        return "the registry carries no position (written by a projector that keeps no index?)"
    if meta.get("generation") != dirty.position.generation:
        return f"generation {meta.get('generation')!r} is not the registry's {dirty.position.generation!r}"
    try:
        sequence = int(meta.get("sequence", ""))
    except ValueError:
        return "no sequence"
    at = dirty.position.sequence
    if dirty.in_flight and not live:
        return f"a batch (position {at}) was cut off before the index caught up; the projector repairs it at start"
    lowest = at - 1 if dirty.in_flight else at
    if sequence < lowest or (not live and sequence != at):
        return f"position {sequence} is not the registry's {at}"
    return None
