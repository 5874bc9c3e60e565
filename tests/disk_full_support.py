"""Filling a disk, or making it read-only: the helpers the disk-full tests share (the `small_disk` tmpfs fixture
is in conftest)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def remount(mount: Path, *, read_only: bool) -> None:
    """Make a tmpfs the test mounted read-only (or writable again). As root, `chmod` stops no write: a
    read-only mount does (`EROFS`), for every user."""
    subprocess.run(
        ["mount", "-o", f"remount,{'ro' if read_only else 'rw'}", str(mount)], check=True, capture_output=True
    )


@contextmanager
def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `mount` (made if missing) for the block; skips where mounting needs a root the
    test does not have."""
    mount.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode().strip()}); needs root or CAP_SYS_ADMIN")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
