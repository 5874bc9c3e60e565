"""`mam-agent`'s runner: claim submitted jobs for one agent name, run them, report back.

Everything is events on the broker: the runner learns of jobs from the
retained `state` topics, claims with `expected_version` (the projector
accepts the first claim and refuses the rest), starts only a job whose state
names it as the claimant, and never touches the registry or log files.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass, field

import aiomqtt
import anyio
import anyio.abc
import msgspec

from mam import events as ev
from mam.agents.output import OutputStreamer
from mam.agents.profiles import render
from mam.agents.publisher import Publisher
from mam.broker_url import BrokerAddress
from mam.ids import validate_agent_id
from mam.mqtt import make_client, unreachable
from mam.provenance import git_info
from mam.record import JobRecord, Status, decode_record
from mam.status import AgentStatus, encode
from mam.timefmt import utc_now_iso
from mam.topics import Topics
from mam.workspace import Workspace

log = logging.getLogger("mam.agent")


@dataclass
class RunningJob:
    record: JobRecord
    process: anyio.abc.Process | None = None
    cancelled: bool = False
    timed_out: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)


def default_agent_id(agent: str) -> str:
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname())[:40] or "host"
    return validate_agent_id(f"{agent}-{host}-{os.getpid()}")


class Runner:
    def __init__(
        self,
        workspace: Workspace,
        broker: BrokerAddress,
        *,
        agent: str,
        argv: list[str],
        concurrency: int = 1,
        heartbeat: float = 5.0,
        kill_grace: float = 5.0,
        agent_id: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.broker = broker
        self.agent = agent
        self.argv = argv
        self.concurrency = concurrency
        self.heartbeat = heartbeat
        self.kill_grace = kill_grace
        self.agent_id = agent_id or default_agent_id(agent)
        self.epoch = uuid.uuid4().hex
        self.started_at = utc_now_iso()
        self.topics = Topics(workspace.id)
        self.active: dict[str, RunningJob] = {}
        self.claiming: set[str] = set()
        self.queued: dict[str, JobRecord] = {}
        """Submitted jobs for this agent not claimed yet, oldest first: claimed as capacity frees."""
        self.pub: Publisher | None = None
        self.stopping = False

    def status(self, status: str) -> AgentStatus:
        return AgentStatus(
            status=status,  # type: ignore[arg-type]
            agent=self.agent,
            agent_id=self.agent_id,
            epoch=self.epoch,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=self.started_at,
            concurrency=self.concurrency,
            jobs=sorted(self.active),
        )

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        status_topic = self.topics.agent_status(self.agent_id)
        will = aiomqtt.Will(status_topic, encode(self.status("offline")), qos=1, retain=True)
        client = make_client(self.broker, will=will, keepalive=10)
        try:
            async with client, Publisher(self.workspace, self.broker, by=self.agent_id) as pub:
                self.pub = pub
                await client.publish(status_topic, encode(self.status("online")), qos=1, retain=True)
                await client.subscribe(self.topics.all_states, qos=1)
                task_status.started()
                log.info("%s serving agent %r in workspace %s", self.agent_id, self.agent, self.workspace.id)
                try:
                    async with anyio.create_task_group() as tg:
                        async for message in client.messages:
                            payload = message.payload if isinstance(message.payload, bytes) else b""
                            try:
                                record = decode_record(payload)
                            except (msgspec.DecodeError, msgspec.ValidationError):
                                continue
                            await self._on_state(record, tg, client)
                finally:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                        await client.publish(status_topic, encode(self.status("offline")), qos=1, retain=True)
        except aiomqtt.MqttError as exc:
            raise unreachable(self.broker, exc) from None

    async def _on_state(self, record: JobRecord, tg: anyio.abc.TaskGroup, client: aiomqtt.Client) -> None:
        if record.agent != self.agent:
            return
        job_id = record.job_id
        running = self.active.get(job_id)
        if running is not None:
            running.record = record
            if record.cancel_requested_at and not running.cancelled:
                running.cancelled = True
                tg.start_soon(self._terminate, running)
            return
        if record.status is Status.SUBMITTED:
            if job_id not in self.claiming:
                self.queued[job_id] = record
                await self._claim_what_fits()
            return
        self.queued.pop(job_id, None)
        if record.status is Status.CLAIMED and record.runner == self.agent_id and job_id in self.claiming:
            self.claiming.discard(job_id)
            self.active[job_id] = RunningJob(record)
            await client.publish(
                self.topics.agent_status(self.agent_id), encode(self.status("online")), qos=1, retain=True
            )
            tg.start_soon(self._run_job, self.active[job_id], client)
        elif job_id in self.claiming:
            self.claiming.discard(job_id)  # another runner won the claim
            await self._claim_what_fits()

    async def _claim_what_fits(self) -> None:
        while self.queued and len(self.active) + len(self.claiming) < self.concurrency:
            job_id, record = next(iter(self.queued.items()))
            del self.queued[job_id]
            self.claiming.add(job_id)
            await self._send(
                job_id, ev.Claimed(runner=self.agent_id, epoch=self.epoch, expected_version=record.version)
            )

    async def _send(self, job_id: str, event: ev.AnyEvent) -> None:
        assert self.pub is not None
        await self.pub.publish(job_id, event)

    async def _run_job(self, job: RunningJob, client: aiomqtt.Client) -> None:
        record = job.record
        job_id = record.job_id
        env = dict(os.environ) | {
            "MAM_PROMPT": record.prompt,
            "MAM_JOB_ID": job_id,
            "MAM_WORKSPACE": self.workspace.id,
            "WORKSPACE_ROOT": str(self.workspace.root),
        }
        argv = render(self.argv, job_id=job_id, workspace=self.workspace.id)
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=self.workspace.root,
                start_new_session=True,
            )
        except OSError as exc:
            await self._send(job_id, ev.Failed(exit_code=None, error=f"cannot start {argv[0]!r}: {exc.strerror}"))
            self._finish(job_id)
            return
        job.process = process
        await self._send(job_id, ev.Started(runner=self.agent_id, pid=process.pid))
        if job.cancelled:  # the cancel request came between the claim and the start
            _signal_group(process.pid, signal.SIGTERM)
        output = OutputStreamer(lambda event: self._send(job_id, event))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._feed, process, record.prompt)
                tg.start_soon(output.read, "stdout", process.stdout)
                tg.start_soon(output.read, "stderr", process.stderr)
                tg.start_soon(output.tick)
                tg.start_soon(self._beat, job_id)
                if record.timeout:
                    tg.start_soon(self._deadline, job, record.timeout)
                code = await process.wait()
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The runner is stopping (SIGTERM): stop the job and hand it back as failed.
            with anyio.CancelScope(shield=True):
                self.stopping = True
                await self._terminate(job)
                code = await process.wait()
                await output.flush_all()
                await self._report(job, code, output)
                self._finish(job_id)
            raise
        with anyio.CancelScope(shield=True):
            await output.flush_all()
            await self._report(job, code, output)
            self._finish(job_id)
            await self._claim_what_fits()
            await client.publish(
                self.topics.agent_status(self.agent_id), encode(self.status("online")), qos=1, retain=True
            )

    async def _report(self, job: RunningJob, code: int, output: OutputStreamer) -> None:
        job_id = job.record.job_id
        if self.stopping:
            await self._send(job_id, ev.Failed(exit_code=code, error="the runner stopped before the job finished"))
        elif job.cancelled:
            await self._send(job_id, ev.Cancelled(reason=job.record.cancel_reason or "cancelled on request"))
        else:
            git = await anyio.to_thread.run_sync(git_info, self.workspace.root)
            if job.timed_out:
                error = f"timed out after {job.record.timeout:g}s"
                await self._send(job_id, ev.Failed(exit_code=code, error=error, git=git))
            elif code == 0:
                await self._send(job_id, ev.Succeeded(exit_code=0, result=output.tail("stdout") or None, git=git))
            else:
                error = output.tail("stderr") or f"exit code {code}"
                await self._send(job_id, ev.Failed(exit_code=code, error=error, git=git))

    def _finish(self, job_id: str) -> None:
        job = self.active.pop(job_id, None)
        if job is not None:
            job.done.set()

    @staticmethod
    async def _feed(process: anyio.abc.Process, prompt: str) -> None:
        assert process.stdin is not None
        try:
            await process.stdin.send(prompt.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await process.stdin.aclose()

    async def _beat(self, job_id: str) -> None:
        while True:
            await anyio.sleep(self.heartbeat)
            await self._send(job_id, ev.Heartbeat(runner=self.agent_id))

    async def _deadline(self, job: RunningJob, timeout: float) -> None:
        await anyio.sleep(timeout)
        job.timed_out = True
        await self._terminate(job)

    async def _terminate(self, job: RunningJob) -> None:
        """SIGTERM the job's process group, SIGKILL after the grace period."""
        process = job.process
        if process is None or process.returncode is not None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(self.kill_grace):
            await process.wait()
            return
        _signal_group(process.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
