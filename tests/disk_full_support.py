"""Filling a disk: the helper the disk-full tests share (the `small_disk` tmpfs fixture is in conftest)."""

from __future__ import annotations

import os
from pathlib import Path


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
