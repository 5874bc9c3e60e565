"""One claimed job, start to finish: start the agent, stream its output, stop it when asked, report.

Every event goes into the runner's outbox, in the order it happened: `started`,
the `output` events (all of them: both pipes are read to their end before
anything else is decided), heartbeats, and one terminal event. The first
reason to stop the agent decides how the job ends: a cancel request ends it
`cancelled`, the job's timeout or the runner's idle timeout (no progress
from the agent for that long: `idle.py`) `timed_out`, the runner stopping releases it
to the queue (`released`, see `release`; `failed` for a job submitted with
`--no-requeue`); a job the registry has already ended (`lost`, say) is stopped
with nothing more to say; otherwise its exit code decides (and, for an agent
run through a profile's `format`, what the agent itself reported:
`formats/verdict.py`). The terminal event says how many `output` events the
attempt published (`outputs`; their seqs are 0 .. outputs-1), so the projector
can tell whether its log holds them all.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import anyio

from mam.agents.job_clocks import JobClocks
from mam.agents.job_env import job_environment
from mam.agents.job_filters import OutputFilters, transcript_for
from mam.agents.job_mcp import give_mam
from mam.agents.job_outcome import outcome
from mam.agents.job_release import Release
from mam.agents.job_setup import Ending, Settings, job_command
from mam.agents.job_worktree import JobWorktree
from mam.agents.key_check import missing_key
from mam.agents.output import OutputStreamer
from mam.agents.process import AgentProcess, spawn
from mam.contract import events as ev
from mam.contract.attempts import attempt_of
from mam.contract.record import JobRecord
from mam.git.provenance import git_info
from mam.git.worktree import Saved

log = logging.getLogger("mam.agent")


class Supervisor:
    """One claimed job, start to finish (see the module). Its parts, each owning its state, are members:
    `clocks` (the job's latest state, its deadline and idle clock: `job_clocks.py`), `filters` (what the
    agent's output passes through, the transcript and the budget: `job_filters.py`), `handover` (its release
    to the queue: `job_release.py`) and `worktree` (`job_worktree.py`; None without `--worktree`); the
    outcome of an agent that ran is `job_outcome.outcome`. All its state is declared in `__slots__`."""

    __slots__ = (
        "_stop_requested",
        "attempt",
        "beats",
        "clocks",
        "ending",
        "filters",
        "handover",
        "job_id",
        "level",
        "process",
        "reported",
        "settings",
        "succeeded",
        "worktree",
    )

    def __init__(self, record: JobRecord, settings: Settings) -> None:
        self.job_id = record.job_id
        self.settings = settings
        self.attempt = attempt_of(record)
        self.ending: Ending | None = None
        """The first reason the agent was stopped (`stop`), which decides how the job ends; None: its exit."""
        self._stop_requested = anyio.Event()
        self.process: AgentProcess | None = None
        self.level: str | None = None
        """The permission level the job runs at (set by `_argv`); None for a command without levels."""
        self.succeeded = False
        """Whether the job was reported `succeeded` (a worktree's clean-up depends on it)."""
        self.reported = False
        """Whether this runner has sent the job's outcome: the registry's answer to it (its end, a retry) is no news."""
        self.beats = 0
        """The `seq` of the job's last heartbeat (this attempt's; `afterbeats.py` goes on counting)."""
        self.clocks = JobClocks.for_job(record, self._stop, settings.idle_timeout)
        transcript = transcript_for(record, settings.output_format)
        self.filters = OutputFilters(self.job_id, transcript, self.clocks.idle, self._stop)
        self.handover = Release(self.job_id, self.attempt)
        self.worktree = JobWorktree(settings.worktrees, self.job_id) if settings.worktrees is not None else None

    @property
    def record(self) -> JobRecord:
        """The job's latest state (the clocks' own)."""
        return self.clocks.record

    @record.setter
    def record(self, record: JobRecord) -> None:
        self.clocks.update(record)

    def stop(self, ending: Ending) -> None:
        """Stop the agent (SIGTERM, then SIGKILL after the grace); the first reason given wins."""
        self._stop(ending)

    def _stop(self, ending: Ending) -> bool:
        """`stop`; whether this was the first reason given (the parts' way to stop the job)."""
        if self.ending is not None:
            return False
        self.ending = ending
        self._stop_requested.set()
        return True

    def release(self, reason: str) -> None:
        """Give the job back to the queue unfinished (the runner is stopping): publish `released` with the
        output counted so far, wait (at most `kill_grace`; not while the broker is away) for the registry to take
        it, then stop the agent; nothing the agent still writes is published. A `--no-requeue` job is stopped and
        handed back `failed` instead. The first reason to stop wins, as for `stop`."""
        if self.record.requeue is False:
            self.stop(Ending.STOPPING)
            return
        if self.ending is None:
            self.handover.reason = reason
            self.stop(Ending.RELEASED)

    def refused(self, event_id: str, reason: str) -> None:
        """The projector refused one of this job's events: only a refused release changes anything (the
        job is then handed back `failed`, as before releases existed: an older projector, say)."""
        self.handover.refused(event_id, reason)

    def take_state(self, record: JobRecord) -> None:
        """A newer state of the job (from the runner): stop the agent if the registry ended or retried it,
        or a cancel was requested; a state of the next attempt (or an end) answers a release."""
        if record.version < self.record.version:
            return  # an older state, replayed
        self.handover.take_state(record)
        moved_on = attempt_of(record) != attempt_of(self.record)
        self.record = record
        if self.ending is not None or self.reported:
            return  # reported: the job's end (or retry) comes back while its worktree is still being saved
        if moved_on:
            # The registry ended this attempt (lost, say) and retries the job: this agent's work is void.
            log.warning(
                "job %s: the registry retries it as attempt %d while this runner runs attempt %d; stopping its agent",
                record.job_id,
                attempt_of(record),
                attempt_of(record) - 1,
            )
            self.stop(Ending.ENDED_ELSEWHERE)
        elif record.status.terminal:
            # A finished job never changes: whatever the agent still does would be refused.
            log.warning(
                "job %s is %s in the registry (%s) while this runner runs it; stopping its agent",
                record.job_id,
                record.status.value,
                record.error or record.cancel_reason or "no reason given",
            )
            self.stop(Ending.ENDED_ELSEWHERE)
        elif record.cancel_requested_at:
            log.info("job %s: cancel requested; stopping it", record.job_id)
            self.stop(Ending.CANCELLED)

    def _put(self, event: ev.AnyEvent) -> None:
        if self.handover.voids:
            return  # released: the job is the next attempt's; what this agent still does is void
        self.succeeded = self.succeeded or isinstance(event, ev.Succeeded)
        self.reported = self.reported or isinstance(event, (ev.Succeeded, ev.Failed, ev.TimedOut, ev.Cancelled))
        self.settings.put(self.job_id, event, self.attempt)

    def _argv(self) -> list[str] | str:
        """The job's command, its permission level's arguments in place; or why it cannot run here."""
        argv, self.level = job_command(self.record, self.settings)
        return argv

    async def run(self) -> None:
        argv = self._argv()
        if self.ending is not None:  # cancelled or stopped before it ever started
            await self._report(None, OutputStreamer(self._put))
            return
        if isinstance(argv, str):
            log.info("job %s: not run: %s", self.job_id, argv)
            self._put(ev.Failed(exit_code=None, error=argv, outputs=0))
            return
        if self.settings.ceiling is not None:
            log.info("job %s: permissions %s", self.job_id, self.record.permissions or self.settings.ceiling)
        env = self._env()
        no_key = missing_key(argv, env, self.settings.workspace.root)
        if no_key is not None:
            log.info("job %s: not run: %s", self.job_id, no_key)
            self._put(ev.Failed(exit_code=None, error=no_key, outputs=0))
            return
        cwd = self.settings.workspace.root
        if self.worktree is not None:
            tree = await self.worktree.create(self.record, self.attempt)
            if isinstance(tree, str):
                self._put(ev.Failed(exit_code=None, error=tree, outputs=0))
                return
            cwd = tree.cwd
        wired = give_mam(self.settings.mcp, argv, env, job_id=self.job_id, workspace_root=self.settings.workspace.root)
        try:
            await self._start(wired.argv, wired.env, cwd)
        finally:
            wired.clean_up()

    async def _start(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        """Start the agent, supervise it to its end, report it, and clean its worktree up."""
        try:
            process = await spawn(argv, env=env, cwd=cwd, grace=self.settings.kill_grace)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL in the prompt's env
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            error = f"cannot start {argv[0]!r}: {detail}"
            log.info("job %s: start failed: %s", self.job_id, error)
            self._put(ev.Failed(exit_code=None, error=error, outputs=0))
            if self.worktree is not None:  # nothing ran in it: no work to lose
                await self.worktree.clean_up(succeeded=False, saved=True)
            return
        self.process = process
        self._put(ev.Started(runner=self.settings.runner_id, pid=process.pid, counts_outputs=True))
        log.info("job %s: started pid %d (%s)", self.job_id, process.pid, argv[0])
        output = OutputStreamer(self._put, room=self.settings.room, filters=self.filters.streams(self.record))
        async with anyio.create_task_group() as beating:  # the lease runs until the outcome is recorded
            beating.start_soon(self._beat)
            code = await self._supervise(process, output)
            log.info("job %s: exited with code %d", self.job_id, code)
            saved = await self.worktree.save(self.ending) if self.worktree is not None else None
            await self._report(code, output, saved)
            if self.worktree is not None:
                await self.worktree.clean_up(succeeded=self.succeeded, saved=saved is not None and saved.committed_all)
            beating.cancel_scope.cancel()

    def _env(self) -> dict[str, str]:
        settings = self.settings
        extra = settings.profile_env.for_level(self.level) if settings.profile_env else {}
        env, fits = job_environment(
            base=dict(os.environ),
            job_id=self.job_id,
            workspace_id=settings.workspace.id,
            workspace_root=settings.workspace.root,
            broker_url=settings.broker_url,
            prompt=self.record.prompt,
            extra=extra,
        )
        if settings.job_broker is not None:  # the job's own login in place of the runner's (`job_broker`)
            env["MAM_BROKER_URL"] = settings.job_broker.url(self.job_id, self.attempt, env)
        if not fits:
            log.info("job %s: the prompt is too long for MAM_PROMPT; it is on stdin only", self.job_id)
        return env

    async def _supervise(self, process: AgentProcess, output: OutputStreamer) -> int:
        """Run until the agent has exited and its output is read to the end; return its exit code."""
        drained = anyio.Event()

        async def read_both() -> None:
            async with anyio.create_task_group() as pipes:
                pipes.start_soon(output.read, "stdout", process.stdout())
                pipes.start_soon(output.read, "stderr", process.stderr())
            drained.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(process.feed, self.record.prompt.encode())
            tg.start_soon(read_both)
            tg.start_soon(output.tick)
            tg.start_soon(self._stop_when_asked, process, output)
            self.clocks.start(tg)
            # wait returns once the agent's guard has ended (so nothing the agent started runs on) and the
            # pipes are closed; the readers then still hold what they have not turned into events yet.
            code = await process.wait()
            await drained.wait()
            tg.cancel_scope.cancel()
        output.flush_all()
        return code

    async def _stop_when_asked(self, process: AgentProcess, output: OutputStreamer) -> None:
        await self._stop_requested.wait()
        if self.ending is Ending.RELEASED:  # the agent runs on until the registry has the job back
            await self.handover.send(output, self.settings)
        await process.terminate(self.settings.kill_grace)

    async def _beat(self) -> None:
        """A heartbeat every `heartbeat` seconds, from the agent's start until the job is reported (then
        `afterbeats.py` beats while its outcome is not recorded)."""
        while True:
            await anyio.sleep(self.settings.heartbeat)
            if not self.reported:
                self.beat()

    def beat(self) -> None:
        """The job's next heartbeat, numbered 1, 2, ... (`seq`, signed like the rest): the projector refuses one
        not above the last it took, so a copy replayed later renews nothing. None for a job the registry ended."""
        if self.ending is not Ending.ENDED_ELSEWHERE:
            self.beats += 1
            self._put(ev.Heartbeat(runner=self.settings.runner_id, seq=self.beats))

    async def _report(self, code: int | None, output: OutputStreamer, saved: Saved | None = None) -> None:
        if self.ending is Ending.RELEASED:
            if await self.handover.settle(output, self.settings):
                return
            self.ending = Ending.STOPPING  # refused or not answered: handed back failed
        if self.ending is Ending.CANCELLED:
            reason = self.record.cancel_reason or "cancelled on request"
            self._put(ev.Cancelled(reason=reason, outputs=output.seq, usage=self.filters.usage_so_far()))
            log.info("job %s: cancelled (%s)", self.job_id, reason)
            return
        if self.ending is Ending.ENDED_ELSEWHERE:
            log.info("job %s: stopped; the registry had already ended it as %s", self.job_id, self.record.status.value)
            return
        if self.ending is Ending.STOPPING:
            error = "the runner stopped before the job finished"
            self._put(
                ev.Failed(
                    exit_code=code,
                    error=error,
                    git=saved.git if saved else None,
                    outputs=output.seq,
                    usage=self.filters.usage_so_far(),
                )
            )
            log.info("job %s: handed back as failed: %s", self.job_id, error)
            return
        if self.worktree is not None and self.worktree.tree is not None:
            git = saved.git if saved else None  # the job's worktree, never the user's checkout
        else:
            git = await anyio.to_thread.run_sync(git_info, self.settings.workspace.root)
        argv = self.settings.argv
        self._put(outcome(self.ending, code, output, git, clocks=self.clocks, filters=self.filters, argv=argv))
