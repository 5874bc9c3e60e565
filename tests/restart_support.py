"""Helpers for the tests of clients that ride out a restart: a command run with its stdout and stderr
in files of their own, read as they grow.

(No tests here.)
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import anyio

from support import child_env, mam

TICKS = 25
BEFORE_FENCE = 10


def ticking(fence: Path) -> str:
    """A shell runner job printing `tick 1` .. `tick 10`, then waiting for the file `fence` (the test makes
    it once the restart is under way), then printing `tick 11` .. `tick 25`, a line every 0.05 s: the job
    cannot end before the restart, and its later lines are printed while the broker is away."""
    return (
        f"for i in $(seq 1 {BEFORE_FENCE}); do echo tick $i; sleep 0.05; done; "
        f"until [ -e {shlex.quote(str(fence))} ]; do sleep 0.05; done; "
        f"for i in $(seq {BEFORE_FENCE + 1} {TICKS}); do echo tick $i; sleep 0.05; done"
    )


class Command:
    """A `mam` command running in the background, stopped by its PID at the end (`stop`)."""

    def __init__(self, name: str, *args: str, cwd: Path, logs: Path) -> None:
        self.out = logs / f"{name}.out"
        self.err = logs / f"{name}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(mam(*args), cwd=cwd, env=child_env(), stdout=out, stderr=err)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    async def said(self, text: str, *, on: str = "stderr", timeout: float = 30) -> None:
        """Return once the command printed `text` (polling the file it writes to); it must not exit first."""
        with anyio.fail_after(timeout):
            while text not in (self.stderr() if on == "stderr" else self.stdout()):
                assert self.proc.poll() is None, f"exited with {self.proc.returncode}: {self.stderr()}"
                await anyio.sleep(0.05)  # polling a file another process writes

    async def connected(self, port: int, *, timeout: float = 30) -> None:
        """Return once the command's first MQTT connection to `port` is made (from then on a lost broker is
        ridden out, not "cannot reach"): its TCP connection has received more than a CONNACK's 4 bytes,
        which the broker sends only once the client, after that CONNACK, has subscribed. A TCP connection
        alone is not enough: a broker stopped before its CONNACK is a first connection that failed."""
        with anyio.fail_after(timeout):
            while bytes_received(self.proc.pid, port) <= 4:
                assert self.proc.poll() is None, f"exited with {self.proc.returncode}: {self.stderr()}"
                await anyio.sleep(0.05)  # polling the kernel's socket table for the connection

    async def wait(self, timeout: float = 60) -> int:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(self.proc.wait)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def bytes_received(pid: int, port: int) -> int:
    """The most bytes one of process `pid`'s established TCP connections to `port` has received (the kernel's
    `tcp_info`, as `ss -ti` prints it; 0 if none)."""
    listing = subprocess.run(
        ["ss", "-tinpH", "state", "established", f"( dport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    most = 0
    lines = listing.splitlines()
    for line, info in zip(lines, lines[1:], strict=False):
        if f"pid={pid}," in line and (found := re.search(r"\bbytes_received:(\d+)", info)):
            most = max(most, int(found.group(1)))
    return most


def ticks_once(stdout: str) -> None:
    """Every tick line is in `stdout` once, in order."""
    ticks = [line for line in stdout.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, TICKS + 1)], stdout
