"""The async publisher API: the only way mam's writers touch a workspace.

    async with Publisher(workspace, broker) as pub:
        job = await pub.submit(JobSpec(prompt="fix the tests", agent="claude-code"), wait=True)  # a JobRecord
        job_id = await pub.submit(prompt="fix the docs", agent="claude-code")  # keywords work too; a str

Writers publish events and read retained state; they never open a file under
the registry or log dirs. When the workspace's public key is on this machine
(`.mam/projector.pub`, beside the registry dir), a state whose signature does
not verify is ignored, with one warning per job (`mam.contract.signing`).
"""

from __future__ import annotations

import logging
import secrets
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import IO, Any, Literal, Unpack, overload

import aiomqtt
import anyio
import msgspec

from mam.agents.delivery import Delivery
from mam.agents.inside_job import default_parent
from mam.agents.projector_wait import projector_online
from mam.agents.resume import resume_fields
from mam.agents.submit_keywords import SubmitKeywords, spec_of
from mam.client.failover import open_client
from mam.client.inbox import messages
from mam.client.mqtt import unreachable
from mam.client.outage import why
from mam.client.reconnecting import Reconnecting
from mam.contract import events as ev
from mam.contract import job_spec
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError, UsageError
from mam.contract.ids import validate_job_id
from mam.contract.job_spec import JobSpec
from mam.contract.record import JobRecord
from mam.contract.signing import StateReader
from mam.contract.status import ProjectorStatus
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.git.provenance import submit_git

log = logging.getLogger("mam")

PROJECTOR_WAIT = 3.0
"""How long `wait=True` waits for a projector to announce itself before refusing."""


class WaitTimeout(MamError):
    exit_code = 3


def new_job_id() -> str:
    """A sortable, collision-resistant job id: `job-YYYYmmdd-HHMMSS-xxxxxx`."""
    return f"job-{utc_now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def new_event_id() -> str:
    return uuid.uuid4().hex


class Publisher:
    """Publishes events for one workspace; `async with` connects and disconnects."""

    def __init__(self, workspace: Workspace, broker: Brokers, *, by: str | None = None) -> None:
        self.workspace = workspace
        self.broker = broker
        self.by = by
        self.topics = Topics(workspace.id)
        self._client: aiomqtt.Client | None = None
        self._replacing = False
        self._states: StateReader | None = None
        self.projector: ProjectorStatus | None = None
        """The projector's latest status seen by `publish_and_wait` (and `publish_served`)."""
        self._also: list[str] = []
        self.can_reconnect = True
        """Whether a connection lost while waiting for a verdict is replaced (`reconnect`) and the event sent
        again; False for a publisher on someone else's connection."""
        self.say_to: IO[str] | None = sys.stderr
        """Where a wait that rides out a lost broker says so (`reconnecting`); None: nowhere."""

    async def __aenter__(self) -> Publisher:
        try:
            client = await open_client(self.broker, keepalive=30)
        except aiomqtt.MqttError as exc:
            raise unreachable(self.broker, exc) from None
        self._client = client
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        client, self._client = self._client, None
        self._replacing = False
        if client is not None:
            try:
                await client.__aexit__(exc_type, exc, tb)
            except aiomqtt.MqttError:
                pass

    @property
    def client(self) -> aiomqtt.Client:
        if self._client is None:
            if self._replacing:  # lost, and no broker took the new connection yet (`reconnect`)
                raise aiomqtt.MqttError(f"the connection to {self.broker.url} is lost")
            raise RuntimeError("use `async with Publisher(...)` before publishing")
        return self._client

    @property
    def states(self) -> StateReader:
        """Reads the job states this publisher waits on (verified if the workspace's key is here)."""
        if self._states is None:
            self._states = StateReader.for_workspace(self.workspace)
        return self._states

    def stamp(self, event: ev.AnyEvent) -> ev.AnyEvent:
        """Give an event the envelope fields the writer owns: id, ts, by."""
        changes: dict[str, Any] = {}
        if event.id is None:
            changes["id"] = new_event_id()
        if event.ts is None:
            changes["ts"] = utc_now()
        if event.by is None and self.by is not None:
            changes["by"] = self.by
        return msgspec.structs.replace(event, **changes) if changes else event

    async def publish(self, job_id: str, event: ev.AnyEvent) -> ev.AnyEvent:
        """Publish one event (QoS 1) and return it as sent, with its id."""
        validate_job_id(job_id)
        event = self.stamp(event)
        try:
            await self.client.publish(self.topics.events(job_id), ev.encode_event(event), qos=1)
        except aiomqtt.MqttError as exc:
            raise unreachable(self.broker, exc) from None
        return event

    @overload
    async def submit(self, spec: JobSpec, /, *, wait: Literal[False] = False, wait_timeout: float = 30.0) -> str: ...
    @overload
    async def submit(self, spec: JobSpec, /, *, wait: Literal[True], wait_timeout: float = 30.0) -> JobRecord: ...
    @overload
    async def submit(self, spec: JobSpec, /, *, wait: bool, wait_timeout: float = 30.0) -> str | JobRecord: ...
    @overload  # the keyword form (`spec` stays None: its type is what lets mypy check the overloads)
    async def submit(
        self,
        spec: None = None,
        /,
        *,
        wait: Literal[False] = False,
        wait_timeout: float = 30.0,
        **options: Unpack[SubmitKeywords],
    ) -> str: ...
    @overload
    async def submit(
        self,
        spec: None = None,
        /,
        *,
        wait: Literal[True],
        wait_timeout: float = 30.0,
        **options: Unpack[SubmitKeywords],
    ) -> JobRecord: ...
    @overload
    async def submit(
        self, spec: None = None, /, *, wait: bool, wait_timeout: float = 30.0, **options: Unpack[SubmitKeywords]
    ) -> str | JobRecord: ...

    async def submit(
        self, spec: JobSpec | None = None, /, *, wait: bool = False, wait_timeout: float = 30.0, **options: Any
    ) -> str | JobRecord:
        """Submit a job: its id, or with `wait=True` the state that records it (a verdict within `wait_timeout`
        seconds, else `WaitTimeout`); the type checker knows which from `wait`.

        The job is a `JobSpec` (`mam.contract.job_spec`: the options every front end takes), or the same options
        as keywords, `submit(prompt=..., agent=..., model="opus")` (`mam.agents.submit_keywords`), not both.
        `parent` defaults to the job this code runs inside (`$MAM_JOB_ID`, set by `mam-agent`), so jobs an agent's
        script delegates are in its tree; `no_parent=True` submits a root job instead. `resume` names a finished
        job of the same `agent` whose session this one continues."""
        if spec is None:
            spec = spec_of(options)
        elif not isinstance(spec, JobSpec):
            raise TypeError(f"Publisher.submit takes a JobSpec or keywords, not {type(spec).__name__}")
        elif options:
            raise UsageError(
                f"Publisher.submit: give a JobSpec or keywords, not both (also given: {', '.join(options)})"
            )
        job_id = spec.job_id or new_job_id()
        parent = default_parent(spec.parent, no_parent=bool(spec.no_parent))
        git = await anyio.to_thread.run_sync(submit_git, self.workspace.root, parent)
        event: ev.AnyEvent = self.stamp(job_spec.submitted(spec, parent=parent, git=git))
        if spec.resume is not None:
            old_id = validate_job_id(spec.resume)
            _, fields = resume_fields(await self.state(old_id), old_id, spec.agent, self.workspace.root)
            event = msgspec.structs.replace(event, **fields)
        if not wait:
            await self.publish(job_id, event)
            return job_id
        return await self.publish_and_wait(job_id, event, timeout=wait_timeout)

    async def submit_spec(self, spec: JobSpec, *, wait: bool = False, wait_timeout: float = 30.0) -> str | JobRecord:
        """`submit(spec, ...)`, by its older name."""
        return await self.submit(spec, wait=wait, wait_timeout=wait_timeout)

    async def publish_and_wait(self, job_id: str, event: ev.AnyEvent, *, timeout: float = 30.0) -> JobRecord:
        """Publish and return the state that records it; raise if refused or unserved.

        Nothing is published unless a projector announces itself online for
        the workspace within `PROJECTOR_WAIT` seconds, or within `timeout` while
        one is starting on this machine (`mam.agents.projector_wait`).
        """
        event = self.stamp(event)
        assert event.id is not None
        deadline = anyio.current_time() + timeout
        try:
            await self.subscribe_for_verdict(job_id)
            await self.wait_projector(min(PROJECTOR_WAIT, timeout), longest=timeout)
        except aiomqtt.MqttError as exc:
            raise unreachable(self.broker, exc) from None
        # From here on the event may be recorded whatever happens to this connection: it is sent again
        # (same id) until the verdict comes (`delivery.py`), and a failure is "no verdict", never
        # "unreachable", so nobody resubmits blindly.
        delivery = Delivery(self, job_id, event)
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0.1)):
                return await delivery.run()
        except TimeoutError:
            lost = f" (the connection to {self.broker.url} was lost: {why(delivery.lost)})" if delivery.lost else ""
            raise WaitTimeout(
                f"job {job_id!r}: published, but no verdict (recorded or refused) came within {timeout:g}s"
                f"{lost}{self._degraded_clause()}; it may still be recorded: check `mam show {job_id}` before "
                "resubmitting, or raise --timeout"
            ) from None
        except aiomqtt.MqttError as exc:  # a connection this publisher cannot replace (a shared one's channel)
            raise WaitTimeout(
                f"job {job_id!r}: lost the connection to {self.broker.url} after publishing ({why(exc)})"
                f"{self._degraded_clause()}; it may be recorded: check `mam show {job_id}` before resubmitting"
            ) from None

    async def subscribe_for_verdict(self, job_id: str) -> None:
        """The topics a verdict comes on (and those `subscribe` added), on the current connection."""
        topics = [self.topics.projector_status, self.topics.state(job_id), self.topics.rejected, *self._also]
        await self.client.subscribe([(topic, 1) for topic in dict.fromkeys(topics)])

    async def subscribe(self, topic: str) -> None:
        """Subscribe, and again on the connection that replaces this one if it is lost while waiting."""
        self._also.append(topic)
        await self.client.subscribe(topic, qos=1)

    async def reconnect(self) -> None:
        """Replace a lost connection (raises `aiomqtt.MqttError` when no broker answers)."""
        old, self._client = self._client, None
        self._replacing = True
        if old is not None:
            with anyio.move_on_after(1):
                try:
                    await old.__aexit__(None, None, None)
                except aiomqtt.MqttError:
                    pass
        self._client = await open_client(self.broker, keepalive=30)
        self._replacing = False

    def reconnecting(self) -> Reconnecting:
        """The rule every follower keeps across restarts (`mam.client.reconnecting`), on this publisher's
        connection: a lost one is replaced (`_renewed`) and the wait starts over on the new one."""
        return Reconnecting(self.broker, err=self.say_to, connected=True, opener=self._renewed)

    @asynccontextmanager
    async def _renewed(self) -> AsyncIterator[Any]:
        """The next connection for `reconnecting`: this publisher's own, replaced (kept open after)."""
        await self.reconnect()
        yield self.client

    def _degraded_clause(self) -> str:
        """`: the projector is degraded: REASON` when its latest status says so, else nothing."""
        status = self.projector
        if status is None or status.status != "degraded":
            return ""
        return f": the projector is degraded: {status.detail or 'no reason given'}"

    def saw_status(self, status: ProjectorStatus | None) -> None:
        """Keep the projector's latest status; say at once (one line on stderr, through logging)
        when it turns degraded, since a verdict may then not come until it recovers."""
        if status is None:
            return
        was = self.projector
        self.projector = status
        if status.status == "degraded" and (was is None or was.status != "degraded"):
            log.warning("the projector is degraded: %s (waiting for its verdict)", status.detail or "no reason given")

    async def publish_served(self, job_id: str, event: ev.AnyEvent) -> ev.AnyEvent:
        """Publish once a projector serves the workspace; return when the broker has
        acknowledged it (QoS 1), not when it is recorded. Raise `NoProjector`
        (publishing nothing) if no projector announces itself in time."""
        try:
            await self.client.subscribe(self.topics.projector_status, qos=1)
            await self.wait_projector(PROJECTOR_WAIT)
        except aiomqtt.MqttError as exc:
            raise unreachable(self.broker, exc) from None
        validate_job_id(job_id)
        event = self.stamp(event)
        try:
            await self.client.publish(self.topics.events(job_id), ev.encode_event(event), qos=1)
        except aiomqtt.MqttError as exc:
            raise WaitTimeout(
                f"job {job_id!r}: the broker did not acknowledge the publish ({why(exc)}); it may still be "
                f"recorded: check `mam show {job_id}` before resubmitting"
            ) from None
        return event

    async def wait_ended(self, job_id: str, *, timeout: float, limit: float | None = None) -> JobRecord:
        """The job's state once it is terminal (succeeded, failed, cancelled, ...), across restarts of the
        broker and the projector (`reconnecting`: the retained state is read again on the new connection).

        `limit`: the caller's whole time limit, named in the error (default `timeout`)."""
        topic = self.topics.state(job_id)
        last: JobRecord | None = None

        async def until_ended(client: aiomqtt.Client) -> JobRecord:
            nonlocal last
            await client.subscribe(topic, qos=1)
            async for message in messages(client):
                if str(message.topic) != topic:
                    continue
                record = self.states.record(topic, _payload(message))
                if record is None:
                    continue
                last = record
                if last.status.terminal:
                    return last
            raise aiomqtt.MqttError("the broker closed the connection")

        try:
            with anyio.fail_after(timeout):
                return await self.reconnecting().run(until_ended, client=self.client)
        except TimeoutError:
            now = f"; it is {last.status.value}" if last is not None else ""
            raise WaitTimeout(
                f"job {job_id!r} had not ended within {limit or timeout:g}s{now}; "
                f"follow it with `mam logs -f {job_id}` or raise --timeout"
            ) from None

    async def wait_projector(self, timeout: float, *, longest: float | None = None) -> None:
        """Return once the projector announces itself online (`mam.agents.projector_wait`); raise
        `NoProjector` if none does within `timeout`, or within `longest` while one is starting here."""
        await projector_online(self, timeout, longest=longest)

    async def state(self, job_id: str, *, timeout: float = 3.0) -> JobRecord | None:
        """The job's retained state, or `None` if the broker holds none in time."""
        client = self.client
        states = self.states
        await client.subscribe(self.topics.state(job_id), qos=1)
        with anyio.move_on_after(timeout):
            async for message in messages(client):
                if str(message.topic) == self.topics.state(job_id):
                    record = states.record(str(message.topic), _payload(message))
                    if record is not None:
                        return record
        return None


def _payload(message: aiomqtt.Message) -> bytes:
    return message.payload if isinstance(message.payload, bytes) else b""


__all__ = ["Publisher", "WaitTimeout", "new_event_id", "new_job_id"]
