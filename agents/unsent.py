"""The events a runner stops with before the broker or the projector had them, kept in a file for the next one.

A runner stopped while the broker is away (or before the projector confirmed what it sent) still holds
events in its outbox: output, a job's outcome or release. It writes them to
`<workspace>/.mam/unsent/<runner id>-<epoch>.jsonl` (mode 0600, written whole: a temporary file, fsync,
rename), says so in one line, and exits. The next `mam-agent` started in the workspace, for any agent,
takes every such file, puts its events at the head of its outbox and removes the file once the broker
has acknowledged them all: the same bytes (each signed with the key of the runner that made it, which
the projector checks against the job's claim), so the projector records each once and counts a copy it
already holds as a duplicate.

Each line is one event: `{"topic", "job_id", "event_id", "type", "payload"}`, the payload as sent
(`jq -r .payload` shows it). Heartbeats are not kept (one sent later would say a job is alive when it is
not), nor claims (a claim made by a runner that is gone would take the job from the queue for nobody:
unsent, the job stays claimable).

A runner takes a file by holding an exclusive lock on it (`flock`) until it is done with it, so two
runners started at once never both send it, and one that dies drops its lock: the file is taken again
at the next start. A file it cannot read is left where it is, said once.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from mam.contract.workspace import Workspace

log = logging.getLogger("mam.agent")

DIRECTORY = Path(".mam") / "unsent"
"""Where, under the workspace root, the files are."""
SKIPPED = frozenset({"heartbeat", "claimed"})
"""Event types never kept in a file (see the module)."""


@dataclass(frozen=True, slots=True)
class Unsent:
    """One event as the runner's outbox holds it: its topic and signed payload, with what identifies it."""

    topic: str
    payload: bytes
    job_id: str
    event_id: str
    kind: str


def directory(workspace: Workspace) -> Path:
    return workspace.root / DIRECTORY


def _line(event: Unsent) -> str:
    try:
        body = {"payload": event.payload.decode("utf-8")}
    except UnicodeDecodeError:  # never for JSON; the bytes are kept whatever they are
        body = {"payload_b64": base64.b64encode(event.payload).decode("ascii")}
    return json.dumps(
        {"topic": event.topic, "job_id": event.job_id, "event_id": event.event_id, "type": event.kind, **body},
        ensure_ascii=False,
    )


def _event(line: str) -> Unsent:
    entry = json.loads(line)
    if "payload_b64" in entry:
        payload = base64.b64decode(entry["payload_b64"], validate=True)
    else:
        payload = str(entry["payload"]).encode("utf-8")
    return Unsent(str(entry["topic"]), payload, str(entry["job_id"]), str(entry["event_id"]), str(entry["type"]))


def write(workspace: Workspace, runner_id: str, epoch: str, events: list[Unsent]) -> Path:
    """Write `events` to this runner instance's file, whole and durable; its path."""
    folder = directory(workspace)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{runner_id}-{epoch[:12]}.jsonl"
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(_line(event) + "\n" for event in events)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def by_job(events: list[Unsent], most: int = 10) -> str:
    """`job-a (17), job-b (1)`: the jobs whose events these are, with how many each (the first `most`)."""
    counts: dict[str, int] = {}
    for event in events:
        counts[event.job_id] = counts.get(event.job_id, 0) + 1
    shown = ", ".join(f"{job_id} ({count})" for job_id, count in list(counts.items())[:most])
    return shown + (" ..." if len(counts) > most else "")


class Taken:
    """A file of unsent events this runner holds (locked) while it sends them."""

    def __init__(self, path: Path, fd: int, events: list[Unsent]) -> None:
        self.path = path
        self.events = events
        self._fd: int | None = fd

    def done(self) -> None:
        """Its events are sent (or in a file of this runner's own): remove it."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            self.release()

    def release(self) -> None:
        """Leave it for the next runner (this one stops without having sent it)."""
        if self._fd is not None:
            os.close(self._fd)  # drops the lock
            self._fd = None


def take_all(workspace: Workspace) -> list[Taken]:
    """Every file of unsent events no other runner holds, oldest first, each locked for this runner."""
    folder = directory(workspace)
    try:
        paths = sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime_ns, p.name))
    except OSError:
        return []
    return [taken for path in paths if (taken := _take(path)) is not None]


def _take(path: Path) -> Taken | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # taken and removed meanwhile
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            raise FileNotFoundError(path)  # removed (and maybe written again) while this runner waited
        with os.fdopen(os.dup(fd), encoding="utf-8") as text:
            events = [_event(line) for line in text.read().splitlines() if line.strip()]
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)  # another runner holds it, or has just sent it
        return None
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
        os.close(fd)
        log.warning("cannot read the unsent events in %s (%s); left as it is", path, exc)
        return None
    return Taken(path, fd, events)


__all__ = ["DIRECTORY", "SKIPPED", "Taken", "Unsent", "by_job", "directory", "take_all", "write"]
