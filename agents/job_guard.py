"""A job's guard: the process the runner starts for each job, which starts the agent and ends everything it started.

An agent's own process group does not hold everything it starts: an npm launcher (Codex's, Gemini's) spawns
the real binary and may die first, a tool double-forks a daemon, a shell calls `setsid`. Those survivors kept
the job's pipes open (the job stayed `running` for ever) and kept writing after a runner's `kill -9`. So the
runner (`process.py`) starts each job as

    python -I -S job_guard.py --parent RUNNER_PID --report FD --grace SECONDS -- ARGV...

(standard library only: it starts in tens of milliseconds, and the job's `PYTHON*` variables do not reach
it), with the job's stdin/stdout/stderr, environment and working directory, which the agent inherits. In the
manner of tini and containerd's shim, the guard:

- makes itself the child subreaper of its descendants (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux 3.4: "When a
  process becomes orphaned (i.e., its immediate parent terminates), then that process will be reparented to
  the nearest still living ancestor subreaper", prctl(2)): whatever the agent starts stays below the guard,
  whoever of its ancestors exits, whatever session or group it moves to;
- starts ARGV in a session of its own, with a parent-death signal SIGKILL (the agent dies with its guard),
  and reports on the pipe FD, a line each: `started PID`, or `error ERRNO TEXT` when ARGV cannot be
  executed; at the end `exited STATUS` (the agent's wait status, so the runner reports the agent's exit
  code, or the signal that ended it, as it did before the guard);
- on SIGTERM (the runner stopping the job: cancel, timeout, idle, a runner stop) sends SIGTERM to every
  descendant, and SIGKILL to whatever is left `--grace` seconds later; SIGINT goes to the agent's group;
- when the agent exits, does the same to whatever it left running: the job ends with its agent;
- when the runner dies, even by `kill -9` (the guard's own parent-death signal, SIGHUP, or a parent other
  than RUNNER_PID), SIGKILLs every descendant at once: the job is `lost`, and nothing of it may write on;
- exits once it has no child left (every descendant's chain of parents ends at the guard, so no child
  means no descendant), with the agent's exit code (128 + the signal that ended it).

Descendants are found by walking /proc's parent links and signalled through a pidfd, after checking that the
process is still the one found (its start time), so a pid reused meanwhile is never signalled.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
RUNNER_GONE = signal.SIGHUP
"""The guard's parent-death signal: a catchable one, so it can end the agent's processes before it goes."""
WAITED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
SWEEP_EVERY = 0.05
"""While killing: how often the descendants are looked for again (one forked meanwhile comes back as a child)."""

Found = tuple[int, bytes]
"""A process found below the guard: its pid and its start time (field 22 of /proc/PID/stat)."""


def _load_prctl() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]  # ctypes' function type is private
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()
"""Looked up once: the agent's side of the fork only calls it."""


def _prctl(option: int, value: int) -> bool:
    return _PRCTL is not None and int(_PRCTL(option, value, 0, 0, 0)) == 0


def _stat(pid: int) -> tuple[int, bytes, bytes] | None:
    """(parent pid, start time, state) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return int(fields[1]), fields[19], fields[0]


def descendants(root: int) -> list[Found]:
    """Every live (not zombie) process below `root`, by /proc's parent links; none where there is no /proc."""
    children: dict[int, list[tuple[int, bytes, bytes]]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            children.setdefault(stat[0], []).append((int(name), stat[1], stat[2]))
    found: list[Found] = []
    todo = [root]
    while todo:
        for pid, start, state in children.get(todo.pop(), ()):
            todo.append(pid)
            if state != b"Z":
                found.append((pid, start))
    return found


def _send(process: Found, sig: int) -> None:
    """Signal `process` if it is still the one found (same start time): through a pidfd, which cannot point at a
    pid reused after the check; by pid where the kernel has no pidfd (before Linux 5.3)."""
    pid, start = process
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):
        pass
    try:
        now = _stat(pid)
        if now is not None and now[1] == start:
            if fd is None:
                os.kill(pid, sig)
            else:
                signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        if fd is not None:
            os.close(fd)


class Guard:
    """The agent's process and what it started, watched until none is left (see the module)."""

    def __init__(self, parent: int, report: int, grace: float) -> None:
        self.parent = parent
        self.report = report
        self.grace = grace
        self.agent = 0
        self.status: int | None = None
        """The agent's wait status, once it was reaped."""
        self.deadline: float | None = None
        """When what is left gets SIGKILL (set by the first SIGTERM sent)."""
        self.killing = False

    def say(self, line: str) -> None:
        try:
            os.write(self.report, f"{line}\n".encode())
        except OSError:  # the runner is gone: nobody reads
            pass

    def start(self, argv: list[str]) -> bool:
        guard = os.getpid()

        def in_child() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the guard blocks what it waits for; the agent must not
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != guard:  # the guard died between fork and prctl
                os._exit(137)

        try:
            self.agent = subprocess.Popen(argv, start_new_session=True, preexec_fn=in_child).pid
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            number = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.say(f"error {number} {' '.join(text.split())}")
            return False
        self.say(f"started {self.agent}")
        null = os.open(os.devnull, os.O_RDONLY)  # the prompt's pipe is the agent's alone: unread, it breaks
        os.dup2(null, 0)
        os.close(null)
        return True

    def stop(self, sig: int) -> None:
        """Send `sig` to the agent's group (while the agent is not reaped, its pid is its group's) and to every
        process below the guard."""
        if self.status is None and self.agent:
            try:
                os.killpg(self.agent, sig)
            except OSError:
                pass
        for process in descendants(os.getpid()):
            _send(process, sig)

    def terminate(self) -> None:
        """SIGTERM to everything, SIGKILL to what is left after the grace (once: a later SIGTERM changes nothing)."""
        if self.deadline is None:
            self.deadline = time.monotonic() + self.grace
            self.stop(signal.SIGTERM)

    def reap(self) -> bool:
        """Reap every child that has exited; whether any is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.agent:
                self.status = status

    def run(self) -> int:
        """Watch until no child is left; the agent's wait status."""
        while self.reap():
            if self.status is not None:
                self.terminate()  # the agent has exited: what it left running goes too
            now = time.monotonic()
            if self.killing or (self.deadline is not None and now >= self.deadline):
                self.killing = True
                self.stop(signal.SIGKILL)
                info = signal.sigtimedwait(WAITED, SWEEP_EVERY)
            elif self.deadline is not None:
                info = signal.sigtimedwait(WAITED, self.deadline - now)
            else:
                info = signal.sigwaitinfo(WAITED)
            if info is not None:
                self.take(info.si_signo)
        assert self.status is not None  # the agent was a child until reaped
        return self.status

    def take(self, sig: int) -> None:
        if sig == RUNNER_GONE or os.getppid() != self.parent:
            self.killing = True  # the job is lost: nothing of it may go on writing
        elif sig == signal.SIGTERM:
            self.terminate()
        elif sig == signal.SIGINT and self.status is None:
            try:
                os.killpg(self.agent, signal.SIGINT)
            except OSError:
                pass


def main(args: list[str]) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)  # taken by sigwaitinfo, one at a time, never mid-step
    options, argv = _split(args)
    parent, report, grace = int(options["--parent"]), int(options["--report"]), float(options["--grace"])
    guard = Guard(parent, report, grace)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:  # the runner died before this could start anything
        return 1
    if not argv or not guard.start(argv):
        return 127
    status = guard.run()
    guard.say(f"exited {status}")
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _split(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """`--name VALUE ... -- ARGV...` as ({name: value}, ARGV)."""
    end = args.index("--") if "--" in args else len(args)
    return dict(zip(args[0:end:2], args[1:end:2], strict=True)), args[end + 1 :]


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
