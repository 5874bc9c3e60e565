"""`mam doctor`'s workspace checks: `.mam/` and what lies in it, read without following a link.

- `workspace.config`: `.mam/config.json`'s file and dir modes can be used (`file_modes.load`).
- `workspace.dir`: `.mam/` is a directory this user may write.
- `workspace.files`: nothing under `.mam/` (and the registry and log dirs, which may be links the user
  chose) is a symbolic link, a fifo, a socket or a device: mam never makes one there, so one was planted
  (the projector refuses to read or write through it). A job's worktree is a checkout of its own: only its
  name is looked at, not what is inside.
- `workspace.modes`: nothing grants group or others more than the configured modes (the projector takes
  the extra bits at its start); the signing key readable by others is a failure.
- `workspace.owner`: nothing belongs to another user (after a `sudo mam up`, say), which this user's
  projector could not write.
- `workspace.disk`: free space and inodes where `.mam/` lives (a full disk stops the projector
  acknowledging events, docs/guarantees.md).
- `workspace.set_aside`: messages the projector failed to handle and set aside (`<logs>/_set_aside.jsonl`, across
  restarts): a warning with how many and why, the fix `mam set-aside --replay --all`.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mam.contract.checks import Check, fail, ok, skip, warn
from mam.contract.errors import UsageError
from mam.contract.signing import KEY_NAME, PUBLIC_NAME
from mam.contract.workspace import MAM_DIR, Workspace
from mam.registry import file_modes
from mam.registry.file_modes import SKIP_INSIDE, Modes
from mam.registry.set_aside_file import SET_ASIDE_FILE, read_entries, summary

DISK_FAIL: Final = 64 * 1024 * 1024
DISK_WARN: Final = 1024 * 1024 * 1024
INODES_FAIL: Final = 1000
SHOWN: Final = 3
"""Paths a check names; past that it says how many more."""
_KINDS: Final = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a fifo",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


@dataclass
class Found:
    """What one walk of the workspace's dirs saw."""

    odd: list[tuple[Path, str]] = field(default_factory=list)
    loose: list[tuple[Path, int]] = field(default_factory=list)
    others: list[tuple[Path, int]] = field(default_factory=list)
    seen: int = 0


def workspace_checks(workspace: Workspace) -> list[Check]:
    """The workspace's checks, in the order `mam doctor` lists them."""
    mam_dir = workspace.root / MAM_DIR
    checks = [_config(workspace)]
    modes = _modes_or_private(workspace)
    checks.append(_dir(mam_dir))
    if not mam_dir.is_dir():
        why = f"{mam_dir} does not exist yet"
        checks += [skip(name, why) for name in ("workspace.files", "workspace.modes", "workspace.owner")]
    else:
        found = walk(_tops(workspace), modes)
        key = workspace.registry_dir.parent / KEY_NAME
        checks += [_files(found, mam_dir), _loose(found, modes, mam_dir, key), _owner(found, mam_dir)]
    checks.append(disk(mam_dir if mam_dir.is_dir() else workspace.root))
    checks.append(set_aside(workspace))
    return checks


def set_aside(workspace: Workspace) -> Check:
    """The messages set aside: the file's, whether or not a projector runs."""
    path = workspace.logs_dir / SET_ASIDE_FILE
    try:
        entries = read_entries(workspace.logs_dir)
    except OSError as exc:
        return warn(
            "workspace.set_aside",
            f"cannot read {path}: {exc.strerror or exc}",
            f"make {path} a file this user may read (the projector writes it)",
        )
    if not entries:
        return ok("workspace.set_aside", "no message set aside")
    return warn(
        "workspace.set_aside",
        f"{summary(entries).describe()}; in {path}",
        "once the cause is fixed: mam set-aside --replay --all (`mam set-aside` lists them; the projector "
        "also tries each again at its next start)",
    )


def _config(workspace: Workspace) -> Check:
    path = workspace.root / MAM_DIR / file_modes.CONFIG_NAME
    try:
        modes = file_modes.load(workspace.root)
    except UsageError as exc:
        return fail("workspace.config", str(exc), f"fix the value in {path} (docs/security.md), or remove the key")
    where = "as set in" if modes != file_modes.PRIVATE else "the default; none set in"
    return ok("workspace.config", f"files {modes.file:04o}, dirs {modes.dir:04o} ({where} {path})")


def _modes_or_private(workspace: Workspace) -> Modes:
    try:
        return file_modes.load(workspace.root)
    except UsageError:
        return file_modes.PRIVATE


def _dir(mam_dir: Path) -> Check:
    if not os.path.lexists(mam_dir):
        return warn(
            "workspace.dir",
            f"{mam_dir} does not exist yet",
            f"start the workspace once: mam up --workspace {mam_dir.parent}",
        )
    if not mam_dir.is_dir():
        return fail(
            "workspace.dir",
            f"{mam_dir} is not a directory",
            f"move it away ({mam_dir} holds mam's registry), then mam up",
        )
    if not os.access(mam_dir, os.W_OK | os.X_OK):
        return fail(
            "workspace.dir",
            f"{mam_dir} is not writable by this user (uid {os.geteuid()})",
            f"run mam as its owner (uid {mam_dir.stat().st_uid}), or chown -R {os.geteuid()} {mam_dir}",
        )
    linked = f", a link to {os.path.realpath(mam_dir)}" if mam_dir.is_symlink() else ""
    return ok("workspace.dir", f"{mam_dir}: a directory this user may write{linked}")


def _tops(workspace: Workspace) -> list[Path]:
    """`.mam/` and the registry and log dirs when they lie elsewhere (not their parent: with `MAM_JOBS_DIR` it
    may be any dir of the user's)."""
    mam_dir = workspace.root / MAM_DIR
    tops = [mam_dir]
    for extra in (workspace.registry_dir, workspace.logs_dir):
        if extra not in tops and os.path.isdir(extra):
            tops.append(extra)
    return tops


def walk(tops: list[Path], modes: Modes) -> Found:
    """Every entry under `tops` by `lstat`, never following a link (a top itself may be one); the
    entries directly in `.mam/worktrees/` are looked at for their kind only, and not entered."""
    found = Found()
    euid = os.geteuid()
    for top in tops:
        for path, seen, kind_only in _entries(top, tops):
            found.seen += 1
            kind = stat.S_IFMT(seen.st_mode)
            if kind == stat.S_IFLNK and path == top:
                continue  # a registry or log dir (or .mam) the user chose to link elsewhere
            if kind in _KINDS:
                found.odd.append((path, _KINDS[kind]))
                continue
            if kind_only:
                continue  # a job's worktree: a checkout with its own modes, which mam leaves alone
            allowed = modes.dir if kind == stat.S_IFDIR else modes.file
            if stat.S_IMODE(seen.st_mode) & 0o077 & ~allowed:
                found.loose.append((path, stat.S_IMODE(seen.st_mode)))
            if euid != 0 and seen.st_uid != euid:
                found.others.append((path, seen.st_uid))
    return found


def _entries(top: Path, tops: list[Path]) -> Iterator[tuple[Path, os.stat_result, bool]]:
    """(path, lstat, whether only its kind counts) for `top` and everything under it, depth first."""
    try:
        yield top, os.lstat(top), False
        stack = [(list(os.scandir(top)), False)]
    except OSError:
        return
    while stack:
        entries, kind_only = stack.pop()
        for entry in entries:
            path = Path(entry.path)
            if path in tops:
                continue  # walked as a top of its own (it may be a link the user chose)
            try:
                seen = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield path, seen, kind_only
            if kind_only or not stat.S_ISDIR(seen.st_mode):
                continue
            inside_kind_only = path.parent == top and top.name == MAM_DIR and entry.name in SKIP_INSIDE
            try:
                stack.append((list(os.scandir(path)), inside_kind_only))
            except OSError:
                continue


def _some(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def _files(found: Found, mam_dir: Path) -> Check:
    if not found.odd:
        return ok("workspace.files", f"no link, fifo, socket or device among {found.seen} entries under {mam_dir}")
    named = _some([f"{path} is {kind}" for path, kind in found.odd])
    first = found.odd[0][0]
    return fail(
        "workspace.files",
        f"{named}: mam never makes one there (the projector refuses to go through it: "
        "that job's events are refused, or it stops)",
        f"remove what was planted (rm {shlex.quote(str(first))}), then restart mam up",
    )


def _loose(found: Found, modes: Modes, mam_dir: Path, key: Path) -> Check:
    try:
        key_mode = stat.S_IMODE(os.lstat(key).st_mode)
    except OSError:
        key_mode = 0
    if key_mode & 0o077:
        return fail(
            "workspace.modes",
            f"the projector's signing key {key} is {key_mode:04o}: whoever else reads it "
            "can sign the job states runners act on (the projector refuses to start)",
            f"chmod 600 {key}; if others did read it, remove it and {key.with_name(PUBLIC_NAME)} and "
            "restart mam up for a new key pair (runners then need the new key)",
        )
    if not found.loose:
        return ok("workspace.modes", f"nothing under {mam_dir} grants more than {modes.describe()}")
    named = _some([f"{path} is {mode:04o}" for path, mode in found.loose])
    fix = (
        f"chmod -R go-rwx {mam_dir} (mam up takes the extra bits at its start; to share with a group, set "
        f"file_mode and dir_mode in {mam_dir / file_modes.CONFIG_NAME})"
    )
    return warn("workspace.modes", f"{named}: more than {modes.describe()} allows", fix)


def _owner(found: Found, mam_dir: Path) -> Check:
    if os.geteuid() == 0:
        return ok("workspace.owner", "running as root: every file can be written")
    if not found.others:
        return ok("workspace.owner", f"everything under {mam_dir} belongs to this user (uid {os.geteuid()})")
    named = _some([f"{path} (uid {uid})" for path, uid in found.others])
    return warn(
        "workspace.owner",
        f"{named} belong to another user: this user's projector cannot write them",
        f"chown -R {os.geteuid()} {mam_dir} (as root), or run mam as that user",
    )


def disk(path: Path) -> Check:
    """Free space and inodes on the filesystem of `path`."""
    try:
        vfs = os.statvfs(path)
    except OSError as exc:
        return skip("workspace.disk", f"cannot read the free space of {path}: {exc.strerror}")
    free = vfs.f_bavail * vfs.f_frsize
    inodes = vfs.f_favail if vfs.f_files else None
    shown = f"{_size(free)} free" + (f", {inodes} inodes" if inodes is not None else "") + f" where {path} lies"
    fix = f"free space on the filesystem of {path}: past a full disk the projector stops acknowledging events"
    if free < DISK_FAIL or (inodes is not None and inodes < INODES_FAIL):
        return fail("workspace.disk", shown, fix)
    if free < DISK_WARN:
        return warn("workspace.disk", shown, fix)
    return ok("workspace.disk", shown)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


__all__ = ["Found", "disk", "set_aside", "walk", "workspace_checks"]
