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
from functools import partial
from pathlib import Path

import anyio
from msgspec import UNSET, UnsetType

from mam.agents.budget import BudgetWatch
from mam.agents.formats import Transcript, parser_for
from mam.agents.formats.verdict import usage_of, verdict
from mam.agents.gave_up import gave_up
from mam.agents.idle import IdleClock, Progress
from mam.agents.job_clocks import JobClocks
from mam.agents.job_env import job_environment
from mam.agents.job_mcp import give_mam
from mam.agents.job_setup import Ending, Settings, job_command
from mam.agents.key_check import missing_key
from mam.agents.output import OutputStreamer, TextFilter
from mam.agents.process import AgentProcess, spawn
from mam.agents.stack_traces import StackTraces
from mam.contract import events as ev
from mam.contract.attempts import attempt_of
from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord
from mam.git.provenance import git_info
from mam.git.worktree import JobTree, Saved, WorktreeError

log = logging.getLogger("mam.agent")

class Supervisor(JobClocks):
    """One claimed job, start to finish (see the module)."""


    def __init__(self, record: JobRecord, settings: Settings) -> None:
        self._record_changed = anyio.Event()
        self.record = record
        self.job_id = record.job_id
        self.settings = settings
        self.ending: Ending | None = None
        self._stop_requested = anyio.Event()
        self.process: AgentProcess | None = None
        self.transcript = Transcript(parser_for(settings.output_format)) if settings.output_format else None
        if self.transcript is not None and isinstance(record.resume_usage, Usage):
            self.transcript.parser.continues(record.resume_usage)  # Codex: the job's own tokens, not the thread's
        self.tree: JobTree | None = None
        self.succeeded = False
        """Whether the job was reported `succeeded` (a worktree's clean-up depends on it)."""
        self.reported = False
        """Whether this runner has sent the job's outcome: the registry's answer to it (its end, a retry) is no news."""
        self.attempt = attempt_of(record)
        self.release_reason = ""
        self.release_id: str | None = None
        """The id of the `released` event sent; nothing more is sent for the job after it, unless refused."""
        self.release_refusal: str | None = None
        self._release_answered = anyio.Event()
        """Set when the registry took the release (a state of the next attempt) or refused it."""
        self.budget: BudgetWatch | None = None
        self.budget_reason = ""
        self.level: str | None = None
        """The permission level the job runs at (set by `_argv`); None for a command without levels."""
        self.idle = IdleClock(settings.idle_timeout) if settings.idle_timeout else None
        self.timeout_reason: str | None = None
        """Why the job timed out, when it was not its own `timeout` (its agent was idle)."""
        self.beats = 0
        """The `seq` of the job's last heartbeat (this attempt's; `afterbeats.py` goes on counting)."""

    def stop(self, ending: Ending) -> None:
        """Stop the agent (SIGTERM, then SIGKILL after the grace); the first reason given wins."""
        if self.ending is None:
            self.ending = ending
            self._stop_requested.set()

    def release(self, reason: str) -> None:
        """Give the job back to the queue unfinished (the runner is stopping): publish `released` with the
        output counted so far, wait (at most `kill_grace`; not while the broker is away) for the registry to take
        it, then stop the agent; nothing the agent still writes is published. A `--no-requeue` job is stopped and
        handed back `failed` instead. The first reason to stop wins, as for `stop`."""
        if self.record.requeue is False:
            self.stop(Ending.STOPPING)
            return
        if self.ending is None:
            self.release_reason = reason
            self.stop(Ending.RELEASED)

    def refused(self, event_id: str, reason: str) -> None:
        """The projector refused one of this job's events: only a refused release changes anything (the
        job is then handed back `failed`, as before releases existed: an older projector, say)."""
        if self.release_id is not None and event_id == self.release_id and not self._release_answered.is_set():
            log.warning("job %s: release refused (%s); handing it back failed", self.job_id, reason)
            self.release_refusal = reason
            self._release_answered.set()

    def _send_release(self, outputs: int) -> None:
        if self.release_id is not None:
            return
        sent = self.settings.put(self.job_id, ev.Released(reason=self.release_reason[:256], outputs=outputs),
                                 self.attempt)
        self.release_id = getattr(sent, "id", None) or ""
        log.info("job %s: releasing it to the queue (%s)", self.job_id, self.release_reason)

    def take_state(self, record: JobRecord) -> None:
        """A newer state of the job (from the runner): stop the agent if the registry ended or retried it,
        or a cancel was requested; a state of the next attempt (or an end) answers a release."""
        if record.version < self.record.version:
            return  # an older state, replayed
        if self.release_id is not None and (attempt_of(record) != self.attempt or record.status.terminal):
            self._release_answered.set()
        moved_on = attempt_of(record) != attempt_of(self.record)
        self.record = record
        if self.ending is not None or self.reported:
            return  # reported: the job's end (or retry) comes back while its worktree is still being saved
        if moved_on:
            # The registry ended this attempt (lost, say) and retries the job: this agent's work is void.
            log.warning("job %s: the registry retries it as attempt %d while this runner runs attempt %d; "
                        "stopping its agent", record.job_id, attempt_of(record), attempt_of(record) - 1)
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
        if self.release_id is not None and self.release_refusal is None:
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
        if self.settings.worktrees is not None:
            base = self.record.git_at_submit.commit if self.record.git_at_submit else None
            continues = self.record.resumes if isinstance(self.record.resumes, str) else None
            # a resumed job runs in its conversation's first job's path (mam/git/conversation_tree.py)
            root = (self.record.resume_root if isinstance(self.record.resume_root, str) else continues) \
                if continues else None
            create = partial(self.settings.worktrees.create, self.job_id, base, continues=continues,
                             later_attempt=self.attempt > 1, directory=root)
            try:
                self.tree = await anyio.to_thread.run_sync(create)
            except WorktreeError as exc:
                log.info("job %s: %s", self.job_id, exc)
                self._put(ev.Failed(exit_code=None, error=str(exc), outputs=0))
                return
            cwd = self.tree.cwd
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
            if self.tree is not None and self.settings.worktrees is not None:  # nothing ran in it: no work to lose
                clean_up = partial(self.settings.worktrees.clean_up, self.tree, succeeded=False, saved=True)
                await anyio.to_thread.run_sync(clean_up)
            return
        self.process = process
        self._put(ev.Started(runner=self.settings.runner_id, pid=process.pid, counts_outputs=True))
        log.info("job %s: started pid %d (%s)", self.job_id, process.pid, argv[0])
        output = OutputStreamer(self._put, room=self.settings.room, filters=self._filters())
        async with anyio.create_task_group() as beating:  # the lease runs until the outcome is recorded
            beating.start_soon(self._beat)
            code = await self._supervise(process, output)
            log.info("job %s: exited with code %d", self.job_id, code)
            saved = await self._save_worktree()
            await self._report(code, output, saved)
            if self.tree is not None and self.settings.worktrees is not None:
                clean_up = partial(self.settings.worktrees.clean_up, self.tree, succeeded=self.succeeded,
                                   saved=saved is not None and saved.committed_all)
                await anyio.to_thread.run_sync(clean_up)
            beating.cancel_scope.cancel()

    def _filters(self) -> dict[str, TextFilter]:
        """What each stream's text passes through: a structured stdout its parser (and budget watch), its stderr
        the removal of stack traces (`stack_traces.py`); with an idle timeout, the watch of the agent's progress
        (`idle.py`: a structured agent's stderr is not)."""
        filters: dict[str, TextFilter] = {"stdout": self._stdout_filter()} if self.transcript else {}
        if self.transcript is not None:  # a structured agent's notices on stderr, without their stack traces
            filters["stderr"] = StackTraces()
        if self.idle is not None and self.transcript is not None:
            filters["stdout"] = Progress(self.idle, filters["stdout"], self.transcript)
        elif self.idle is not None:
            filters = {stream: Progress(self.idle) for stream in ("stdout", "stderr")}
        return filters

    def _stdout_filter(self) -> Transcript | BudgetWatch:
        """The agent's stream, read by its parser; watched against the job's budget when it has one."""
        assert self.transcript is not None
        self.budget = BudgetWatch.for_job(self.record, self.transcript, self._over_budget)
        return self.budget or self.transcript

    def _over_budget(self, reason: str) -> None:
        if self.ending is None:
            log.info("job %s: %s; stopping it", self.job_id, reason)
            self.budget_reason = reason
        self.stop(Ending.OVER_BUDGET)

    async def _save_worktree(self) -> Saved | None:
        """Commit what the agent left in its worktree, then push its branch when the runner has `--push`
        and the job's outcome will name it (`git`); None without a worktree (or when git could not read it)."""
        if self.tree is None or self.settings.worktrees is None:
            return None
        trees = self.settings.worktrees
        try:
            saved = await anyio.to_thread.run_sync(trees.finish, self.tree)
        except WorktreeError as exc:
            log.warning("job %s: cannot save worktree %s: %s", self.job_id, self.tree.path, exc)
            return None
        if self.ending in (Ending.CANCELLED, Ending.RELEASED, Ending.ENDED_ELSEWHERE):
            return saved  # no `git` in what is reported: nothing would say where the branch went
        return await anyio.to_thread.run_sync(trees.push, saved)

    def _env(self) -> dict[str, str]:
        settings = self.settings
        extra = settings.profile_env.for_level(self.level) if settings.profile_env else {}
        env, fits = job_environment(base=dict(os.environ), job_id=self.job_id, workspace_id=settings.workspace.id,
                                    workspace_root=settings.workspace.root, broker_url=settings.broker_url,
                                    prompt=self.record.prompt, extra=extra)
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
            if self.record.timeout:
                tg.start_soon(self._deadline, self.record.timeout)
            if self.idle is not None:
                self.idle.progress()  # the clock starts with the agent
                tg.start_soon(self._idle, self.idle)
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
            await self._released(output)
        await process.terminate(self.settings.kill_grace)

    async def _released(self, output: OutputStreamer) -> bool:
        """Send the release (once), with every output event so far counted; whether the registry took it
        within `kill_grace` seconds."""
        if self.release_id is None:
            output.flush_all()
            self._send_release(output.seq)
        if self.settings.online():  # while the broker is away no answer can come: the release waits in the outbox
            with anyio.move_on_after(self.settings.kill_grace):
                await self._release_answered.wait()
        return self._release_answered.is_set() and self.release_refusal is None

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

    def _usage_so_far(self) -> Usage | UnsetType:
        """What the agent's stream reported using until now (a job stopped before its result still used
        tokens: claude's messages carry them); left out for a plain command or a stream that said nothing."""
        return usage_of(self.transcript.parser.outcome()) if self.transcript else UNSET

    async def _report(self, code: int | None, output: OutputStreamer, saved: Saved | None = None) -> None:
        if self.ending is Ending.RELEASED:
            if await self._released(output):
                log.info("job %s: released to the queue", self.job_id)
                return
            if self.release_refusal is None and not self.settings.online():
                log.info("job %s: released while the broker is away; the release is sent with the runner's unsent "
                         "events", self.job_id)
                return
            if self.release_refusal is None:  # never answered: hand it back as before releases existed
                log.warning("job %s: no answer to its release within %gs; handing it back failed",
                            self.job_id, self.settings.kill_grace)
                self.release_refusal = "not answered"
            self.ending = Ending.STOPPING
        if self.ending is Ending.CANCELLED:
            reason = self.record.cancel_reason or "cancelled on request"
            self._put(ev.Cancelled(reason=reason, outputs=output.seq, usage=self._usage_so_far()))
            log.info("job %s: cancelled (%s)", self.job_id, reason)
            return
        if self.ending is Ending.ENDED_ELSEWHERE:
            log.info("job %s: stopped; the registry had already ended it as %s", self.job_id, self.record.status.value)
            return
        if self.ending is Ending.STOPPING:
            error = "the runner stopped before the job finished"
            self._put(ev.Failed(exit_code=code, error=error, git=saved.git if saved else None, outputs=output.seq,
                                usage=self._usage_so_far()))
            log.info("job %s: handed back as failed: %s", self.job_id, error)
            return
        if self.tree is not None:
            git = saved.git if saved else None  # the job's worktree, never the user's checkout
        else:
            git = await anyio.to_thread.run_sync(git_info, self.settings.workspace.root)
        if self.ending is Ending.OVER_BUDGET:
            self._put(ev.Failed(exit_code=code, error=self.budget_reason, git=git, usage=self._usage_so_far(),
                                outputs=output.seq))
        elif self.ending is Ending.TIMED_OUT:
            reason = self.timeout_reason or f"timed out after {self.record.timeout:g}s"
            self._put(ev.TimedOut(reason=reason, exit_code=code, git=git, usage=self._usage_so_far(),
                                  outputs=output.seq))
        elif self.transcript is not None and code is not None:
            parser = self.transcript.parser
            outcome, stderr = parser.outcome(), output.tail("stderr")
            self._put(verdict(outcome, program=parser.program, code=code, stderr=stderr, git=git, outputs=output.seq))
        elif code == 0 and (given_up := gave_up(self.settings.argv, output.tail("stdout"))) is not None:
            self._put(ev.Failed(exit_code=0, error=given_up, git=git, outputs=output.seq))  # aider: gave_up.py
        elif code == 0:
            self._put(ev.Succeeded(exit_code=0, result=output.tail("stdout") or None, git=git, outputs=output.seq))
        else:
            self._put(ev.Failed(exit_code=code, error=output.tail("stderr") or f"exit code {code}", git=git,
                                outputs=output.seq))

