"""Reading the registry and audit log as files (read only; the projector writes).

Nothing inside the registry or log dir is read through a link (the dirs
themselves may be links the user chose): a record or log that is a link was
planted, and what it points at is no job's (`mam.registry.nofollow`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from mam.contract.errors import MamError
from mam.contract.ids import validate_job_id
from mam.contract.record import JobRecord, decode_record
from mam.contract.workspace import Workspace
from mam.registry.nofollow import PathRefused, read_at, read_beneath
from mam.registry.query import NoSuchJob, resolve_job_id


class NotFound(MamError):
    pass


Damaged = Callable[[str, str], None]
"""Told of a record that is there and cannot be read (`records_at`): its path, and what to do, in one line."""


def _tampered(exc: PathRefused) -> MamError:
    return MamError(tampered_line(exc))


def tampered_line(exc: PathRefused) -> str:
    """What a reader says of a name in the registry that is not what the projector makes there."""
    return f"{exc} (a tampered workspace?): remove it, then run `mam rebuild`"


def damaged_line(path: str | Path, exc: Exception) -> str:
    """What a reader says of a record that does not decode (`mam show` of it, `mam jobs` listing past it)."""
    return f"record {path} is damaged ({exc}): run `mam rebuild`"


def _record_names(fd: int, *, links: bool = False) -> list[str]:
    with os.scandir(fd) as entries:
        return sorted(
            e.name
            for e in entries
            if e.name.endswith(".json") and not e.name.startswith(".") and (links or not e.is_symlink())
        )


def job_ids(workspace: Workspace) -> list[str]:
    """The ids the registry's file names name (nothing is opened but the dir). Links are named too:
    reading one then says it was planted."""
    try:
        fd = os.open(workspace.registry_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        return [name.removesuffix(".json") for name in _record_names(fd, links=True)]
    finally:
        os.close(fd)


def resolve_id(workspace: Workspace, text: str) -> str:
    """The registry's one job id that is `text` or starts or ends with it (`mam show 5732ef`).

    Raises `mam.registry.query.AmbiguousJob` (exit 2, naming the candidates) when
    several do; when none does, `text` as typed (reading it then says what is
    missing: the record, or the audit log of a job that has none)."""
    validate_job_id(text)
    if _named(workspace, text) or _pruned(workspace, text):
        return text  # an exact id wins (a pruned job's too): nothing to list
    try:
        return resolve_job_id(text, _ids_like(workspace, text))
    except NoSuchJob:
        return text


def resolve_known(workspace: Workspace, text: str, flag: str = "") -> str:
    """`resolve_id`, and `NoSuchJob` (exit 1) when no job is or was `text`: no record, no tombstone. For a
    filter (`mam jobs --parent`), where an unknown id would otherwise match nothing and exit 0."""
    job = resolve_id(workspace, text)
    if not (_named(workspace, job) or _pruned(workspace, job)):
        said = f"{flag}: " if flag else ""
        raise NoSuchJob(f"{said}no job {text!r} in {workspace.registry_dir}: check the id with `mam jobs`")
    return job


def _named(workspace: Workspace, job_id: str) -> bool:
    """Whether the registry has an entry `<job_id>.json` (a link counts: reading it says it was planted)."""
    try:
        os.stat(workspace.registry_dir / f"{job_id}.json", follow_symlinks=False)
    except OSError:
        return False
    return True


def _pruned(workspace: Workspace, job_id: str) -> bool:
    """Whether the job was pruned (it has a tombstone, `mam.registry.archive`)."""
    from mam.registry.archive import TOMBSTONES_DIR

    try:
        os.stat(workspace.registry_dir / TOMBSTONES_DIR / job_id, follow_symlinks=False)
    except OSError:
        return False
    return True


def _ids_like(workspace: Workspace, text: str) -> list[str]:
    """The ids that may match `text`: from the query index when it is current, else every file name."""
    from mam.registry.index import IndexReader

    reader = IndexReader.open(workspace.registry_dir)
    if reader is None:
        return job_ids(workspace)
    with reader:
        try:
            return reader.ids_like(text)
        except sqlite3.DatabaseError:  # a damaged index: the file names, as without one
            pass
    return job_ids(workspace)


def iter_records(workspace: Workspace, damaged: Damaged | None = None) -> Iterator[JobRecord]:
    """Every record that decodes, by name; links and hidden files are skipped, and one that does not
    decode is told to `damaged` (if given)."""
    return _registry_records(workspace, _record_names, damaged)


def records_of(workspace: Workspace, ids: Iterable[str]) -> Iterator[JobRecord]:
    """The records of `ids` that exist and decode, in that order (a page's, say); links are skipped."""
    return _registry_records(workspace, lambda _fd: (f"{job_id}.json" for job_id in ids))


def _registry_records(
    workspace: Workspace, names: Callable[[int], Iterable[str]], damaged: Damaged | None = None
) -> Iterator[JobRecord]:
    """The records named by `names(fd)`, read beneath the registry directory opened once as `fd`."""
    root = workspace.registry_dir
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        yield from records_at(fd, Path(root), names(fd), damaged)
    finally:
        os.close(fd)


def records_at(fd: int, root: Path, names: Iterable[str], damaged: Damaged | None = None) -> Iterator[JobRecord]:
    """The records named `names` in the registry open at `fd`, in that order; one that is gone, a
    link, or does not decode is left out, and (but for one gone) told to `damaged` if given."""
    for name in names:
        shown = str(root / name)
        try:
            data = read_at(fd, name, shown=shown, action="read")
            if data is not None:
                yield decode_record(data)
        except PathRefused as exc:
            if damaged is not None:
                damaged(shown, tampered_line(exc))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if damaged is not None:
                damaged(shown, damaged_line(shown, exc))
        except OSError:
            continue


def read_record(workspace: Workspace, job_id: str) -> JobRecord:
    validate_job_id(job_id)
    path = workspace.registry_dir / f"{job_id}.json"
    try:
        data = read_beneath(workspace.registry_dir, path.name)
    except PathRefused as exc:
        raise _tampered(exc) from None
    if data is None:
        raise NotFound(f"no job {job_id!r} in {workspace.registry_dir}: check the id with `mam jobs`")
    try:
        return decode_record(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MamError(damaged_line(path, exc)) from None


def read_pruned(workspace: Workspace, job_id: str) -> tuple[JobRecord, Path] | None:
    """A pruned job's last record and where its archived log is (`mam.registry.archive`), or `None`."""
    from mam.registry.archive import ArchiveError, archived_record

    try:
        return archived_record(workspace, job_id)
    except PathRefused as exc:
        raise _tampered(exc) from None
    except ArchiveError as exc:
        raise MamError(f"{exc}: `mam rebuild --verify` lists what is damaged") from None


def read_record_or_pruned(workspace: Workspace, job_id: str) -> JobRecord:
    """The job's record, or a pruned job's last one (the fold of its archived log), else `NotFound`."""
    try:
        return read_record(workspace, job_id)
    except NotFound:
        pruned = read_pruned(workspace, job_id)
        if pruned is None:
            raise
        return pruned[0]


def _archived_log(workspace: Workspace, job_id: str) -> bytes:
    """The log of a job that was pruned (its archive), else `NotFound`."""
    from mam.registry.archive import ArchiveError, read_archived_log

    try:
        found = read_archived_log(workspace, job_id)
    except PathRefused as exc:
        raise _tampered(exc) from None
    except ArchiveError as exc:
        raise MamError(f"{exc}: `mam rebuild --verify` lists what is damaged") from None
    if found is None:
        raise NotFound(f"no audit log for job {job_id!r} in {workspace.logs_dir}: check the id with `mam jobs`")
    return found[0]


def read_events(workspace: Workspace, job_id: str) -> list[dict[str, Any]]:
    validate_job_id(job_id)
    try:
        data = read_beneath(workspace.logs_dir, job_id, "events.jsonl")
    except PathRefused as exc:
        raise _tampered(exc) from None
    if data is None:
        data = _archived_log(workspace, job_id)
    entries = []
    for line in data.split(b"\n"):
        if line:
            try:
                entries.append(msgspec.json.decode(line))
            except msgspec.DecodeError:
                break
    return entries
