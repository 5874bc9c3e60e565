"""The libc calls Python does not bind: `syncfs(2)` and `renameat2(2)` (Linux only)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from typing import Final

AT_FDCWD: Final = -100
RENAME_EXCHANGE: Final = 2


def linux_libc_call(name: str, argtypes: list[type]) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """A libc function Python does not bind (syncfs, renameat2), or `None` off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        func = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    func.argtypes = argtypes
    func.restype = ctypes.c_int
    return func


syncfs = linux_libc_call("syncfs", [ctypes.c_int])
_renameat2 = linux_libc_call("renameat2", [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint])
HAS_RENAMEAT2: Final = _renameat2 is not None


def exchange_at(src_dir_fd: int, src: str | os.PathLike[str], dst_dir_fd: int, dst: str | os.PathLike[str]) -> int:
    """Swap two names atomically (`renameat2(RENAME_EXCHANGE)`), each relative to a directory
    descriptor (`AT_FDCWD`: the cwd): 0, or the errno why not (`ENOSYS` where the OS has no such call).
    Neither name is followed if it is a link: the link itself moves."""
    if _renameat2 is None:
        return errno.ENOSYS
    if _renameat2(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst), RENAME_EXCHANGE) == 0:
        return 0
    return ctypes.get_errno()
