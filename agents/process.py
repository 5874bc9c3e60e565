"""An agent's process: started so that it never outlives the runner, stopped by its group.

`anyio.open_process` has no `preexec_fn`, so the process is started with
asyncio's subprocess support (the runner runs on anyio's asyncio backend).
On Linux the child asks the kernel, between fork and exec, to SIGKILL it
when its parent dies (`PR_SET_PDEATHSIG`): a runner killed with `kill -9`
takes its agents with it, without having to do anything as it dies. The
setting survives `exec` and is bound to the thread that forked, so `spawn`
must be called from the event-loop thread (asyncio forks there), never from
a worker thread that may end before the runner does.

Each agent runs in a session (and process group) of its own, so a signal
reaches the tools it started too.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

PR_SET_PDEATHSIG = 1
READ_SIZE = 64 * 1024


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()
"""Looked up once in the parent: the child only calls it (no loading, no imports after fork)."""


def _die_with(parent: int) -> Callable[[], None] | None:
    """The child-side hook: SIGKILL me when `parent` dies; exit if it already has."""
    prctl = _prctl
    if prctl is None:
        return None
    kill = int(signal.SIGKILL)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the runner died between fork and prctl
            os._exit(137)

    return hook


class AgentProcess:
    """A running agent: its pid, its output pipes, its prompt pipe, and how to stop it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    async def feed(self, data: bytes) -> None:
        """Write `data` to the agent's stdin and close it; an agent that does not read it is fine."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            stdin.close()
            try:
                await stdin.wait_closed()
            except (BrokenPipeError, ConnectionResetError):
                pass

    def stdout(self) -> AsyncIterator[bytes]:
        assert self._process.stdout is not None
        return _chunks(self._process.stdout)

    def stderr(self) -> AsyncIterator[bytes]:
        assert self._process.stderr is not None
        return _chunks(self._process.stderr)

    def signal_group(self, sig: signal.Signals) -> None:
        """Signal the agent's process group (it leads its own session)."""
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    async def terminate(self, grace: float) -> None:
        """SIGTERM the group; SIGKILL it if the agent has not exited after `grace` seconds."""
        if self.returncode is not None:
            return
        self.signal_group(signal.SIGTERM)
        with anyio.move_on_after(grace):
            await self.wait()
            return
        self.signal_group(signal.SIGKILL)


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while data := await reader.read(READ_SIZE):
        yield data


async def spawn(argv: list[str], *, env: dict[str, str], cwd: Path) -> AgentProcess:
    """Start `argv` with piped stdin/stdout/stderr; raise `OSError` if it cannot be executed."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_die_with(os.getpid()),
    )
    return AgentProcess(process)


__all__ = ["AgentProcess", "spawn"]
