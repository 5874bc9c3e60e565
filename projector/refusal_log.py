"""`<logs>/_rejected.jsonl`: every refusal with its reason, bounded in size and in rate.

Anyone who may publish can send refusable messages as fast as the broker
takes them, and each refusal costs a line (with up to 2 KiB of its payload):
unbounded, they would fill the disk and put the projector in `degraded` for
everyone. So the log is bounded twice:

- Size: before a write would take the file past `max_bytes` (8 MiB), it is
  rotated as logrotate does: `_rejected.jsonl.2` becomes `.3` (the oldest,
  `.{keep}`, is replaced), `.1` becomes `.2`, the file becomes `.1`, and a new
  file starts. At most `keep + 1` files (4), each `max_bytes` plus one batch.
- Rate: each source (the job the refused event names, else the agent of an
  `agents/<id>/...` topic, else the topic's first level under the workspace:
  an MQTT subscriber is not told who published) gets at most `per_source`
  (100) lines a `window` (10 s), and all sources together `total` (1,000).
  Past that, refusals are counted, not written, and said once in the log;
  when the window ends, one line per source says how many it left out
  (`"N more refusals from job X suppressed ..."`, with `suppressed: N`), the
  `SUMMARIES` largest by count and one line for the rest. Every refusal is
  still published on `rejected` (its sender may wait for it) and counted in
  the metrics (`mam_projector_refusals_suppressed`).

`.mam/config.json` may set them: `{"refusal_log": {"max_bytes": 8388608, "keep": 3, "per_source": 100,
"total": 1000, "window": 10}}`. Readers: `mam.registry.refusal_files`.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

import msgspec

from mam.contract.errors import UsageError
from mam.contract.timefmt import utc_now_iso
from mam.contract.workspace_config import config_entry
from mam.projector.appender import Appender
from mam.projector.dirs import Root, warn_once
from mam.projector.durable import SyncPlan
from mam.registry.nofollow import PathRefused
from mam.registry.refusal_files import REJECTED_FILE, rotated_name

log = logging.getLogger("mam.projector")

SUMMARIES: Final = 20
"""Sources summed up one line each when a window ends; the rest share one line."""
MAX_SOURCES: Final = 10_000
"""Sources told apart in one window; more are counted together as `OTHERS`."""
OTHERS: Final = "other sources"
_SHORT: Final = 64


@dataclass(frozen=True, slots=True)
class RefusalLimits:
    max_bytes: int = 8 * 1024 * 1024
    keep: int = 3
    per_source: int = 100
    total: int = 1_000
    window: float = 10.0


def load_limits(workspace_root: Path) -> RefusalLimits:
    """`refusal_log` from `<root>/.mam/config.json`, else the defaults; a bad value is one `UsageError` line."""
    path, given = config_entry(workspace_root, "refusal_log")
    given = {} if given is None else given
    wanted = ", ".join(f'"{f.name}": N' for f in fields(RefusalLimits))
    if not isinstance(given, dict) or set(given) - {f.name for f in fields(RefusalLimits)}:
        raise UsageError(f"{path}: refusal_log must be an object with some of {{{wanted}}}")
    limits = RefusalLimits()
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise UsageError(f"{path}: refusal_log.{key} must be a number, not {value!r}")
        field: dict[str, Any] = {key: value if key == "window" else int(value)}  # a name checked above
        limits = replace(limits, **field)
    if not (
        1024 <= limits.max_bytes <= 2**40
        and 0 <= limits.keep <= 100
        and limits.per_source >= 1
        and limits.total >= 1
        and 0 < limits.window <= 3600
    ):
        raise UsageError(
            f"{path}: refusal_log needs max_bytes >= 1024, keep 0-100, per_source and total >= 1, "
            f"window above 0 and at most 3600 (seconds); got {given}"
        )
    return limits


class Suppressed(msgspec.Struct, frozen=True, kw_only=True):
    """The line that stands for the refusals of one source a window left out."""

    received_at: str
    topic: str
    reason: str
    source: str
    suppressed: int
    job_id: str | None = None


def source_of(topic: str, job_id: str | None) -> str:
    """Who a refusal is counted against (see the module docstring)."""
    if job_id:
        return f"job {job_id[:_SHORT]}"
    parts = topic.split("/", 4)
    if len(parts) >= 4 and parts[2] in ("jobs", "agents"):
        return f"{parts[2][:-1]} {parts[3][:_SHORT]}"
    return "topic " + "/".join(parts[:3])[: 3 * _SHORT]


@dataclass(slots=True)
class _Window:
    started: float | None = None
    written: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)

    def copy(self) -> _Window:
        return _Window(self.started, self.written, dict(self.counts), dict(self.left_out), dict(self.topics))


_encoder: Final = msgspec.json.Encoder()


class RefusalLog:
    """Writes `_rejected.jsonl` within its limits; the audit log's appender holds its descriptor."""

    def __init__(self, limits: RefusalLimits, appender: Appender, root: Root) -> None:
        self.limits = limits
        self._appender = appender
        self._root = root
        self._window = _Window()
        self.suppressed = 0
        """Refusals counted and not written, since start (`mam_projector_refusals_suppressed`)."""
        self.rotations = 0

    def append(
        self,
        rejections: Sequence[msgspec.Struct],
        plan: SyncPlan,
        now: float | None = None,
        *,
        write: Callable[[bytes], None] | None = None,
    ) -> set[int]:
        """Write the refusals the rate allows (after the summaries of a window that ended, if any),
        joining `plan`'s barrier (or hand their bytes to `write`: the journal's); the indices of those
        left out. All or nothing: if the write fails the counts are as before, so a retried commit
        counts nothing twice."""
        now = time.monotonic() if now is None else now
        saved = self._window.copy()
        lines = self._ended(now)
        window = self._window
        if window.started is None and rejections:
            window.started = now
        left_out: set[int] = set()
        for i, rejection in enumerate(rejections):
            topic, job_id = getattr(rejection, "topic", ""), getattr(rejection, "job_id", None)
            if self._admit(source_of(topic, job_id), topic):
                lines.append(_encoder.encode(rejection) + b"\n")
            else:
                left_out.add(i)
        try:
            if lines:
                (write or functools.partial(self._write, plan=plan))(b"".join(lines))
        except BaseException:
            self._window = saved
            raise
        self.suppressed += len(left_out)
        return left_out

    def due(self, now: float) -> bool:
        """Whether a window with refusals left out has ended: its summaries wait to be written."""
        window = self._window
        return bool(window.left_out) and window.started is not None and now - window.started >= self.limits.window

    def _admit(self, source: str, topic: str) -> bool:
        window, limits = self._window, self.limits
        if source not in window.counts and source not in window.left_out and len(window.counts) >= MAX_SOURCES:
            source = OTHERS
        count = window.counts.get(source, 0)
        if count < limits.per_source and window.written < limits.total:
            window.counts[source] = count + 1
            window.written += 1
            return True
        if source not in window.left_out and len(window.left_out) < SUMMARIES:  # said for the first few only
            log.warning(
                "refusals from %s past %d (or %d from all) in %g s: counted, not written to %s, until the window ends",
                source,
                limits.per_source,
                limits.total,
                limits.window,
                REJECTED_FILE,
            )
        window.left_out[source] = window.left_out.get(source, 0) + 1
        window.topics[source] = topic
        return False

    def _ended(self, now: float) -> list[bytes]:
        """If the window ended: its summary lines, and a new window."""
        window = self._window
        if window.started is None or now - window.started < self.limits.window:
            return []
        self._window = _Window()
        return self._summaries(window)

    def _summaries(self, window: _Window) -> list[bytes]:
        ranked = sorted(window.left_out.items(), key=lambda item: (-item[1], item[0]))
        shown, rest = ranked[:SUMMARIES], ranked[SUMMARIES:]
        limits = self.limits
        per = f"past {limits.per_source} from one source or {limits.total} from all in {limits.window:g} s"
        lines = []
        for source, count in shown:
            job_id = source.removeprefix("job ") if source.startswith("job ") else None
            reason = f"{count} more refusals from {source} suppressed ({per})"
            lines.append(
                Suppressed(
                    received_at=utc_now_iso(),
                    topic=window.topics[source],
                    reason=reason,
                    source=source,
                    suppressed=count,
                    job_id=job_id,
                )
            )
        if rest:
            count = sum(n for _, n in rest)
            reason = f"{count} more refusals from {len(rest)} other sources suppressed ({per})"
            lines.append(
                Suppressed(
                    received_at=utc_now_iso(),
                    topic=window.topics[rest[0][0]],
                    reason=reason,
                    source=OTHERS,
                    suppressed=count,
                )
            )
        for line in lines:
            log.info("%s", line.reason)
        return [_encoder.encode(line) + b"\n" for line in lines]

    def flush(self, plan: SyncPlan, *, everything: bool = False) -> None:
        """Write the summaries of a window that ended (with `everything`, of the current one too:
        the projector is stopping)."""
        if everything and self._window.left_out:
            self._window.started = float("-inf")
        self.append([], plan)

    def fd(self) -> int | None:
        """The file, open to append (kept by the appender); `None` if it is a link (said once)."""
        try:
            return self._appender.open_at(REJECTED_FILE, self._root.make(), REJECTED_FILE)
        except PathRefused as exc:
            warn_once(exc, "refused events are published on `rejected` but not logged until it is removed")
            return None

    def reserve(self, size: int, before_rotation: Callable[[], None]) -> int | None:
        """Where `size` more bytes go (the journal's `Append` offset), rotating first if they would take the
        file past `max_bytes`: after `before_rotation` (a durable checkpoint: no journal entry refers to
        the file being rotated) and durably. `None` if the file is a link."""
        fd = self.fd()
        if fd is None:
            return None
        at = os.fstat(fd).st_size
        if at and at + size > self.limits.max_bytes:
            before_rotation()
            plan = SyncPlan()
            self._rotate(plan)
            plan.sync()
            return 0
        return at

    def _write(self, data: bytes, plan: SyncPlan) -> None:
        root = self._root.make()
        try:
            fd = self._appender.open_at(REJECTED_FILE, root, REJECTED_FILE)  # no job id starts with `_`
        except PathRefused as exc:
            warn_once(exc, "refused events are published on `rejected` but not logged until it is removed")
            return
        size = os.fstat(fd).st_size
        if size and size + len(data) > self.limits.max_bytes:
            self._rotate(plan)
            fd = self._appender.open_at(REJECTED_FILE, root, REJECTED_FILE)
        self._appender.write(fd, data, plan)

    def _rotate(self, plan: SyncPlan) -> None:
        """`.{n}` to `.{n+1}` from the oldest kept down, the file to `.1` (renames in the dir, no
        link followed: a link at a rotated name is replaced or moved, never written through)."""
        self._appender.forget(REJECTED_FILE)
        root = self._root.make()
        names = [REJECTED_FILE, *(rotated_name(n) for n in range(1, self.limits.keep + 1))]
        if self.limits.keep == 0:
            root.unlink(REJECTED_FILE)
        for older, newer in reversed(list(zip(names, names[1:], strict=False))):
            try:
                root.replace(older, newer)
            except FileNotFoundError:
                continue
        plan.changed(root)
        self.rotations += 1
        log.info(
            "rotated %s at %d bytes (keeping %d older file(s))",
            root.join(REJECTED_FILE),
            self.limits.max_bytes,
            self.limits.keep,
        )
