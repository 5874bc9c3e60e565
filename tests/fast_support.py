"""The fast layer's rule, enforced: a test marked `fast` starts no process and opens no connection.

A module joins the layer with `pytestmark = pytest.mark.fast`, a test of a module that also starts real programs
with `@pytest.mark.fast` (docs/contributing.md, The fast layer). While a fast test (and its fixtures) runs,
starting a subprocess or connecting a socket fails it with a line saying so, so a test that needs a real
program cannot creep into `pytest -m fast` unnoticed.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest

# Imported here, before any fast test runs: loading it starts a process (`ctypes.util.find_library("c")` runs
# `ldconfig -p`), and which fast test imported it first would otherwise depend on the order they ran in.
import mam.projector.libc  # noqa: F401

FAST = "fast"
MARKER_HELP = (
    f"{FAST}: pure in-process tests a developer runs on every change (`pytest -m fast`, under a minute); "
    "they may start no process and open no socket connection"
)


class FastTestReachedOut(Exception):
    """A test marked fast started a process or connected a socket (never caught by the code under test)."""


def _refuse(what: str, nodeid: str, seen: list[str]) -> NoReturn:
    line = (
        f"{nodeid} is marked fast but {what}: fast tests start no process and open no connection; "
        "take its `fast` mark off (`@pytest.mark.fast`, or its module's `pytestmark`)"
    )
    seen.append(line)
    raise FastTestReachedOut(line)


@contextmanager
def no_processes_or_connections(item: pytest.Item) -> Iterator[None]:
    """While the body runs, for a test marked fast: Popen (every subprocess and asyncio's subprocesses go
    through its `_execute_child`) and socket connects raise, and the test fails even if the code swallowed it."""
    if item.get_closest_marker(FAST) is None:
        yield
        return
    nodeid = item.nodeid
    if item.get_closest_marker("slow") is not None:  # `-m fast` would bring a slow scenario into the fast run
        pytest.fail(f"{nodeid} is marked both fast and slow: take one mark off", pytrace=False)
    seen: list[str] = []

    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> NoReturn:
        _refuse(f"started a subprocess ({args!r:.200})", nodeid, seen)

    def connect(self: socket.socket, address: Any) -> NoReturn:
        _refuse(f"connected a socket to {address!r}", nodeid, seen)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", execute_child)
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect)
        try:
            yield
        except BaseException:
            if not seen:
                raise
    if seen:  # raised here, out of the handler, so the report is the one line, whatever the code made of it
        pytest.fail(seen[0], pytrace=False)
