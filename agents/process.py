"""An agent's process: started behind a guard of its own, so that nothing it starts outlives its job or the runner.

Each job runs as `job_guard.py` (a small stdlib-only Python process, the runner's child) which starts the
agent and ends whatever the agent started when the job ends, is stopped, or the runner dies: see its module.
The runner talks to the guard through signals (SIGTERM: stop the job) and one pipe on which the guard reports
the agent's pid, or why it could not start, and at the end the agent's wait status. The pid `started`
reports and the runner logs is the agent's (what runs the job's command, as before the guard); the guard is
its parent.

`anyio.open_process` has no `preexec_fn`, so the guard is started with asyncio's subprocess support (the
runner runs on anyio's asyncio backend). On Linux the guard asks the kernel, between fork and exec, to send
it SIGHUP when its parent dies (`PR_SET_PDEATHSIG`; catchable, so the guard can SIGKILL the job's processes
before it goes): a runner killed with `kill -9` takes its jobs with it, without having to do anything as it
dies. The setting survives `exec` and is bound to the thread that forked, so `spawn` must be called from the
event-loop thread (asyncio forks there), never from a worker thread that may end before the runner does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

log = logging.getLogger("mam.agent")

PR_SET_PDEATHSIG = 1
READ_SIZE = 64 * 1024
GUARD = Path(__file__).with_name("job_guard.py")
GUARD_SLACK = 5.0
"""How long past the kill grace the runner waits for a stopped job's guard before it kills the guard itself
(and the agent's group): the guard ends within the grace and a sweep, so only a broken one takes this."""


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
    """The child-side hook: send me SIGHUP when `parent` dies (the guard then ends the job's processes); exit
    if it already has."""
    prctl = _prctl
    if prctl is None:
        return None
    hup = int(signal.SIGHUP)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, hup, 0, 0, 0)
        if os.getppid() != parent:  # the runner died between fork and prctl
            os._exit(137)

    return hook


class _Report:
    """The guard's side of the conversation: one line per step (`started PID`, `error ERRNO TEXT`,
    `exited STATUS`), and the end of the pipe when the guard has exited."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._buffer = b""

    async def line(self) -> str | None:
        """The next line; None once the guard has exited (the pipe is closed then)."""
        while b"\n" not in self._buffer:
            if self._fd is None:
                return None
            await anyio.wait_readable(self._fd)
            try:
                data = os.read(self._fd, 4096)
            except BlockingIOError:
                continue
            if not data:
                self.close()
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class AgentProcess:
    """A running agent behind its guard: its pid, its output pipes, its prompt pipe, and how to stop it
    together with everything it started."""

    def __init__(self, guard: asyncio.subprocess.Process, agent_pid: int, report: _Report) -> None:
        self._guard = guard
        self._pid = agent_pid
        self._report = report
        self._code: int | None = None
        self._guard_gone = anyio.Event()

    @property
    def pid(self) -> int:
        """The agent's pid (the guard's child; the `started` event's `pid`)."""
        return self._pid

    @property
    def guard_pid(self) -> int:
        return self._guard.pid

    @property
    def returncode(self) -> int | None:
        """The agent's exit code (negative: the signal that ended it), once its guard has ended."""
        return self._code

    async def wait(self) -> int:
        """The agent's exit code (negative: the signal that ended it), once its guard has ended, which it does
        only when nothing the agent started runs on, and the job's pipes are closed."""
        status: int | None = None
        while (line := await self._report.line()) is not None:
            word, _, value = line.partition(" ")
            if word == "exited":
                status = int(value)
        self._guard_gone.set()
        if status is None:  # the guard itself was killed (SIGKILL, the OOM killer): the agent died with it
            log.warning(
                "the guard (pid %d) of agent pid %d ended without reporting the agent's end; killing the "
                "agent's process group",
                self.guard_pid,
                self.pid,
            )
            self.signal_group(signal.SIGKILL)
        code = await self._guard.wait()
        self._code = code if status is None else os.waitstatus_to_exitcode(status)
        return self._code

    async def feed(self, data: bytes) -> None:
        """Write `data` to the agent's stdin and close it; an agent that does not read it is fine."""
        stdin = self._guard.stdin
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
        assert self._guard.stdout is not None
        return _chunks(self._guard.stdout)

    def stderr(self) -> AsyncIterator[bytes]:
        assert self._guard.stderr is not None
        return _chunks(self._guard.stderr)

    def signal_group(self, sig: signal.Signals) -> None:
        """Signal the agent's process group (it leads its own session): the last resort when its guard is gone
        or does not answer; the guard reaches what left the group too."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def terminate(self, grace: float) -> None:
        """Stop the agent and everything it started: its guard sends them SIGTERM, and SIGKILL to what is left
        after `grace` seconds, then ends (`job_guard.py`), also when the agent itself has already exited. A
        guard still there `GUARD_SLACK` seconds after that is killed, and the agent's group with it."""
        if self._guard_gone.is_set():
            return  # the guard ends only once nothing of the job runs on
        try:
            self._guard.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            return
        with anyio.move_on_after(grace + GUARD_SLACK):
            await self._guard_gone.wait()
            return
        log.warning(
            "the guard (pid %d) of agent pid %d did not end %gs after SIGTERM; killing it and the agent's "
            "process group",
            self.guard_pid,
            self.pid,
            grace + GUARD_SLACK,
        )
        try:
            self._guard.kill()
        except ProcessLookupError:
            pass
        self.signal_group(signal.SIGKILL)


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while data := await reader.read(READ_SIZE):
        yield data


async def spawn(argv: list[str], *, env: dict[str, str], cwd: Path, grace: float) -> AgentProcess:
    """Start `argv` behind its guard, with piped stdin/stdout/stderr; raise `OSError` if it cannot be executed.
    `grace`: how long the guard gives the job's processes between SIGTERM and SIGKILL."""
    read_end, write_end = os.pipe()
    report = _Report(read_end)
    try:
        guard = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(GUARD),
            "--parent",
            str(os.getpid()),
            "--report",
            str(write_end),
            "--grace",
            repr(grace),
            "--",
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            pass_fds=(write_end,),
            preexec_fn=_die_with(os.getpid()),
        )
    except BaseException:
        report.close()
        raise
    finally:
        os.close(write_end)
    try:
        first = await report.line()
    except BaseException:  # cancelled while the guard starts: it stops whatever it started
        report.close()
        with contextlib.suppress(ProcessLookupError):
            guard.send_signal(signal.SIGTERM)
        raise
    word, _, value = (first or "").partition(" ")
    if word == "started":
        log.debug("agent pid %s started by its guard, pid %d", value, guard.pid)
        return AgentProcess(guard, int(value), report)
    report.close()
    code = await guard.wait()
    if word == "error":
        number, _, text = value.partition(" ")
        raise OSError(int(number), text)
    raise OSError(f"the job's guard exited with code {code} before it started the agent")


__all__ = ["AgentProcess", "spawn"]
