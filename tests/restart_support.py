"""Helpers for the tests of clients that ride out a restart: a command run with its stdout and stderr
in files of their own, read as they grow.

(No tests here.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio

from support import child_env, mam

TICKS = 25
TICKING = f"for i in $(seq 1 {TICKS}); do echo tick $i; sleep 0.2; done"
"""A shell runner job printing a line every 0.2 s for 5 s."""


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

    async def wait(self, timeout: float = 60) -> int:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(self.proc.wait)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def ticks_once(stdout: str) -> None:
    """Every tick line is in `stdout` once, in order."""
    ticks = [line for line in stdout.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, TICKS + 1)], stdout
