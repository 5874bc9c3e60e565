"""The one way mam runs git: `git -C DIR ...`, no shell, no stdin, a timeout, and one line on failure.

Every git call in mam goes through `run` (the completed process, for callers
that read the exit code) or `git` (stdout, or `GitError` with git's own last
line). A git that is missing, fails to start or outlives its timeout raises
`GitError` naming the git command, so a hung repository or remote never hangs
a runner or a CLI. The environment drops the variables that would point git
at another repository or index than the one named with `-C` (`git_env`).

`read_capped` reads only the start of a long output (the dashboard's diff), under
the same timeout. `mam diff`'s pager is the one call left outside: the user
reads it for as long as they like.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

GIT_TIMEOUT: Final = 120.0
"""How long one git command may take before it counts as failed."""
_ENV_DROPPED: Final = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")
"""Variables that would point git at another repository or index than the one named with -C."""


class GitError(Exception):
    """A git command that could not run, outlived its timeout, or failed: one line naming the command."""


def git_env() -> dict[str, str]:
    """The environment for git: without the variables that would point it at another repository."""
    return {key: value for key, value in os.environ.items() if key not in _ENV_DROPPED}


def run(
    directory: Path,
    *args: str,
    timeout: float = GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    options: tuple[str, ...] = (),
    missing: str = "git is not on PATH",
) -> subprocess.CompletedProcess[str]:
    """Run `git [options] -C directory args` to the end; its completed process whatever the exit code.

    `GitError` only when git did not run to an exit code: `missing` when git is
    not on PATH, else `git CMD did not finish within Ns` or `git CMD failed: why`.
    `env` defaults to `git_env()`; `options` go before `-C` (`-c key=value`). git
    runs in a session of its own, so a timeout stops it and whatever it started
    (a hook, an alias, a credential helper) together."""
    argv = ["git", *options, "-C", str(directory), *args]
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=git_env() if env is None else dict(env),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError(missing) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in an argument
        raise GitError(f"git {_command(args)} failed: {exc}") from None
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            proc.communicate()
            raise GitError(f"git {_command(args)} did not finish within {timeout:g}s") from None
        except BaseException:  # interrupted: git and what it started go too
            _stop_group(proc)
            proc.wait()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _stop_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def git(
    directory: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT, missing: str = "git is not on PATH"
) -> str:
    """Run `git -C directory args`; its stdout stripped ("" on a non-zero exit when not `check`), or
    `GitError` with git's own last line."""
    out = run(directory, *args, timeout=timeout, missing=missing)
    if check and out.returncode != 0:
        raise GitError(f"git {_command(args)}: {last_line(out)}")
    return out.stdout.strip() if out.returncode == 0 else ""


def succeeds(directory: Path, *args: str, timeout: float = GIT_TIMEOUT) -> bool:
    """Whether `git -C directory args` exits 0 (`merge-base --is-ancestor`, `diff --quiet`)."""
    return run(directory, *args, timeout=timeout).returncode == 0


def last_line(out: subprocess.CompletedProcess[str]) -> str:
    """git's last line of stderr (else stdout), or the exit code when it said nothing."""
    return (out.stderr.strip() or out.stdout.strip() or f"exit code {out.returncode}").splitlines()[-1]


def read_capped(
    directory: Path, *args: str, cap: int, timeout: float = GIT_TIMEOUT, options: tuple[str, ...] = ()
) -> tuple[bytes, bool]:
    """The first `cap` bytes `git [options] -C directory args` writes (git is stopped past them), and whether
    it wrote more; `GitError` naming the command if it did not run or outlived `timeout`."""
    argv = ["git", *options, "-C", str(directory), *args]
    try:  # a session of its own: a timeout or the cap stops git and whatever it started (an alias, a filter)
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=git_env(),
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError("git is not on PATH") from None
    except (OSError, ValueError) as exc:
        raise GitError(f"git {_command(args)} failed: {exc}") from None

    def stop() -> None:
        _stop_group(proc)

    timed_out = threading.Event()

    def stop_late() -> None:
        timed_out.set()
        stop()

    late = threading.Timer(timeout, stop_late)  # a git that hangs ends the read: its pipe closes
    late.start()
    with proc:
        assert proc.stdout is not None
        data = proc.stdout.read(cap + 1)
        cut = len(data) > cap
        if cut:
            stop()
        proc.wait()
    late.cancel()
    if timed_out.is_set() and not cut:
        raise GitError(f"git {_command(args)} did not finish within {timeout:g}s")
    return data[:cap], cut


def _command(args: tuple[str, ...]) -> str:
    return args[0] if args else ""


__all__ = ["GIT_TIMEOUT", "GitError", "git", "git_env", "last_line", "read_capped", "run", "succeeds"]
