"""Live views: `mam jobs --watch` (`mam watch`) and `mam agents --watch`.

Driven by the broker subscription (retained states first, then each change),
never by re-reading files. Three forms: on a terminal the table is redrawn in
place (newest first, cut to the screen, statuses coloured unless `NO_COLOR`);
piped, one line per status change of a job, starting with the time of that
change (ISO 8601 UTC, to the second); `--json`, one record per line (ndjson),
for every new version. A lost broker is reconnected (`mam.client.watch_follow`).
SIGINT or SIGTERM ends the watch with exit 0.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO

import anyio
import msgspec

from mam.cli.tables import (
    JOB_HEADER,
    agent_row,
    agent_table,
    denied_count,
    job_row,
    line,
    render,
    use_colour,
    with_denials,
)
from mam.client.live import AgentChange, JobChange
from mam.client.signals import run_until_signal
from mam.client.watch_follow import following
from mam.contract import presence
from mam.contract.broker_list import Brokers
from mam.contract.record import JobRecord
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.registry.pruning import is_pruned
from mam.registry.query import JobFilter, select

TICK = 2.0
"""How often a terminal view is redrawn without a change, so ages stay true."""
_HOME_CLEAR = "\x1b[H\x1b[2J"
_HIDE_CURSOR, _SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


@dataclass
class _Screen:
    """The terminal form: redraw the whole frame in place when something changed, or every TICK."""

    out: IO[str]
    title: str
    frame: Callable[[int, int], list[str]]
    dirty: anyio.Event | None = None
    """Made in the event loop, by `run`."""
    trouble: str | None = None
    """Shown in the footer while the broker is lost."""

    def changed(self) -> None:
        if self.dirty is not None:
            self.dirty.set()

    def notice(self, trouble: str | None) -> None:
        self.trouble = trouble
        self.changed()

    async def run(self) -> None:
        self.out.write(_HIDE_CURSOR)
        try:
            while True:
                self.dirty = anyio.Event()
                self._draw()
                with anyio.move_on_after(TICK):
                    await self.dirty.wait()
        finally:
            self.out.write(_SHOW_CURSOR + "\n")
            self.out.flush()

    def _draw(self) -> None:
        size = shutil.get_terminal_size()
        lines = self.frame(max(size.lines - 1, 2), size.columns)  # the footer takes the last line
        state = f" · {self.trouble}" if self.trouble else ""
        footer = f"{self.title} · {utc_now():%H:%M:%S} UTC{state} · Ctrl-C to stop"
        self.out.write(_HOME_CLEAR + "\n".join([*lines, footer[: size.columns]]))
        self.out.flush()


def _print(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()


def watch_jobs(
    workspace: Workspace,
    broker: Brokers,
    where: JobFilter,
    initial: list[JobRecord],
    *,
    as_json: bool,
    limit: int | None,
    out: IO[str] = sys.stdout,
    matching: int = 0,
) -> int:
    """Show the jobs matching `where` and every change to them until a signal; 0. `initial` may be
    only the newest of the `matching` jobs the registry held (the first screen, read through the index)."""
    topics = Topics(workspace.id)
    states = StateReader.for_workspace(workspace)
    known: dict[str, JobRecord] = {r.job_id: r for r in initial}
    tty = out.isatty() and not as_json
    colour = use_colour(out)

    def emit(record: JobRecord) -> None:
        if as_json:
            _print(out, json.dumps(msgspec.to_builtins(record)))
        else:
            _print(out, line([_second(record.updated_at), *job_row(record, utc_now())]))

    def frame(rows: int, columns: int) -> list[str]:
        room = max(rows - 2, 1)  # the header, and the line that says how many more there are
        shown, total = select(known.values(), where, min(room, limit or room))
        # a DENIED column as `mam jobs` has, when a shown job's agent was refused a tool call
        header, table = with_denials(
            JOB_HEADER, [job_row(r, utc_now()) for r in shown], [denied_count(r) for r in shown]
        )
        lines = render(table, header, colour=colour, width=columns)
        total = max(total, matching)
        if total > len(shown):
            lines.append(f"... {total - len(shown)} more not shown")
        return lines

    screen = _Screen(out, f"mam jobs --watch: workspace {workspace.id}", frame)

    def first_screen() -> None:
        """Piped: the jobs there already, once subscribed (so no change is missed after them)."""
        if not tty:
            for record in select(initial, where, limit)[0]:
                emit(record)

    async def follow() -> None:
        async for change in following(
            broker, topics, states, jobs=True, subscribed=first_screen, notice=screen.notice if tty else None
        ):
            if not isinstance(change, JobChange):
                continue
            record = change.record
            before = known.get(record.job_id)
            if before is not None and before.version >= record.version:
                continue
            pruned = is_pruned(record)
            if pruned:  # its last state: it leaves the registry, and this view (piped: one line more)
                known.pop(record.job_id, None)
            else:
                known[record.job_id] = record
            if tty:
                screen.changed()
            elif where.matches(record) and (as_json or pruned or before is None or before.status != record.status):
                emit(record)  # piped plain lines: status changes only, not each output chunk's new version

    return _run(follow, screen if tty else None)


def watch_agents(
    workspace: Workspace, broker: Brokers, *, as_json: bool, everything: bool, out: IO[str] = sys.stdout
) -> int:
    """Show the runners and every change of their status until a signal; 0."""
    topics = Topics(workspace.id)
    known: dict[str, AgentStatus] = {}
    tty = out.isatty() and not as_json
    colour = use_colour(out)

    def frame(rows: int, columns: int) -> list[str]:
        now = utc_now()
        shown = presence.visible(known.values(), now, everything=everything)[: max(rows - 1, 1)]  # and the header
        header, table = agent_table(shown, now)
        return render(table, header, colour=colour, width=columns)

    screen = _Screen(out, f"mam agents --watch: workspace {workspace.id}", frame)

    async def follow() -> None:
        async for change in following(
            broker, topics, StateReader(workspace.id, None), jobs=False, notice=screen.notice if tty else None
        ):
            if not isinstance(change, AgentChange) or change.status is None:
                continue
            if known.get(change.agent_id) == change.status:
                continue
            known[change.agent_id] = change.status
            if tty:
                screen.changed()
            elif as_json:
                _print(out, json.dumps(msgspec.to_builtins(change.status)))
            else:
                _print(out, line(agent_row(change.status, utc_now(), labels=bool(change.status.labels))))

    return _run(follow, screen if tty else None)


def _second(stamp: str) -> str:
    """A recorded ISO 8601 UTC time cut to the second: `2026-12-04T08:50:01Z`."""
    return f"{stamp[:19]}Z" if len(stamp) >= 19 and stamp.endswith("Z") else stamp


def _run(follow: Callable[[], Awaitable[None]], screen: _Screen | None) -> int:
    """Follow the changes until a signal, redrawing `screen` (on a terminal) beside; 0."""

    async def body() -> None:
        if screen is None:
            await follow()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(screen.run)
            await follow()
            tg.cancel_scope.cancel()

    anyio.run(run_until_signal, body)
    return 0


__all__ = ["watch_agents", "watch_jobs"]
