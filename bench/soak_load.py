"""The soak's workload: a publisher that records what the broker acknowledged, a monitor of states,
refusals and the projector's status, and the jobs (shell scripts for real runners, and synthetic
jobs whose every event the harness publishes, some resent, some shuffled).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field

import aiomqtt
import anyio

from mam.client.inbox import messages
from mam.client.mqtt import make_client
from mam.contract import events as ev
from mam.contract.broker_url import parse_broker_url
from mam.contract.identity import RunnerKey

PUBLISH_TIMEOUT = 10.0
"""A publish not acknowledged in this long is tried again on a new connection (same event id)."""
SYNTHETIC_KEY = RunnerKey()
"""The synthetic jobs' runner key: their claims name it and every runner event is signed by it, as
mam-agent's are (only a signed claim starts a job)."""


def encode(ws: str, job: str, event: ev.AnyEvent) -> bytes:
    """An event as published: a runner's (anything but a submit) signed with `SYNTHETIC_KEY` over the
    workspace and the job, as mam-agent signs them."""
    payload = ev.encode_event(event)
    return payload if isinstance(event, ev.Submitted) else SYNTHETIC_KEY.sign_event(job, payload, ws)


@dataclass
class Ack:
    job: str
    at: float
    kind: str
    resend: bool


class Publisher:
    """QoS 1 publishes on one connection, reconnecting when the broker goes; each acknowledged event
    is recorded with its time. A publish cut off before its PUBACK is sent again with the same id,
    as a runner does."""

    def __init__(self, url: str, ws: str) -> None:
        self.address = parse_broker_url(url)
        self.ws = ws
        self.acks: dict[str, Ack] = {}
        self.attempts = 0
        self.retries = 0
        self._client: aiomqtt.Client | None = None
        self._lock = anyio.Lock()

    async def _connected(self) -> aiomqtt.Client:
        async with self._lock:
            while self._client is None:
                client = make_client(self.address, identifier=f"soak-pub-{self.ws}", max_inflight_messages=200,
                                     max_queued_outgoing_messages=0)  # fmt: skip
                client.pending_calls_threshold = 1000
                try:
                    with anyio.fail_after(5):
                        await client.__aenter__()
                    self._client = client
                except (aiomqtt.MqttError, TimeoutError, OSError):
                    await anyio.sleep(0.5)  # the broker is away (a fault): try again
            return self._client

    async def _drop(self, client: aiomqtt.Client) -> None:
        async with self._lock:
            if self._client is client:
                self._client = None
                with anyio.move_on_after(2, shield=True):
                    try:
                        await client.__aexit__(None, None, None)
                    except Exception:  # noqa: BLE001 - the connection is already gone
                        pass

    async def send(self, job: str, event: ev.AnyEvent, *, resend: bool = False) -> None:
        payload = encode(self.ws, job, event)
        topic = f"mam/{self.ws}/jobs/{job}/events"
        while True:
            client = await self._connected()
            self.attempts += 1
            try:
                with anyio.fail_after(PUBLISH_TIMEOUT):
                    await client.publish(topic, payload, qos=1)
            except (aiomqtt.MqttError, TimeoutError, OSError):
                self.retries += 1
                await self._drop(client)
                continue
            if event.id is not None:  # the first acknowledgement counts (a resend's original was one)
                self.acks.setdefault(event.id, Ack(job, time.monotonic(), ev.event_type(event), resend))
            return

    async def send_pipelined(self, job: str, events: list[ev.AnyEvent]) -> None:
        """Publish `events` in order without waiting for each PUBACK (a runner's in-flight window):
        each publish hands its packet to paho in its task's first step, and tasks start in order. One
        cut off is sent again on its own, after the others (a resend out of order)."""
        client = await self._connected()
        failed: list[ev.AnyEvent] = []

        async def one(event: ev.AnyEvent) -> None:
            try:
                with anyio.fail_after(PUBLISH_TIMEOUT):
                    await client.publish(f"mam/{self.ws}/jobs/{job}/events", encode(self.ws, job, event), qos=1)
            except (aiomqtt.MqttError, TimeoutError, OSError):
                failed.append(event)
                return
            self.acks.setdefault(event.id, Ack(job, time.monotonic(), ev.event_type(event), False))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            for event in events:
                tg.start_soon(one, event)
        self.attempts += len(events)
        for event in failed:
            self.retries += 1
            await self.send(job, event)

    async def close(self) -> None:
        if self._client is not None:
            await self._drop(self._client)


@dataclass
class Monitor:
    """Follows states, refusals and the projector's status; measures how long each acknowledged
    event waits for the state that shows it applied (or its refusal)."""

    url: str
    ws: str
    publisher: Publisher
    states: dict[str, dict] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    lags: list[tuple[float, float]] = field(default_factory=list)
    """(published at, taken at) of each event seen applied or refused."""
    statuses: list[tuple[float, int, str, bool]] = field(default_factory=list)
    """(received at, pid, status, retained) of each projector status."""
    _pending: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def expect(self, job: str, event_id: str) -> None:
        """`event_id` of `job` is about to be published: time it until a state shows it (or its
        refusal comes). Registered before the publish: a state can come before the PUBACK."""
        self._pending.setdefault(job, []).append((event_id, time.monotonic()))

    def pending(self) -> int:
        return sum(len(v) for v in self._pending.values())

    def _taken(self, job: str, upto: str | None, only: str | None = None) -> None:
        waiting = self._pending.get(job)
        if not waiting:
            return
        now = time.monotonic()
        ids = [eid for eid, _ in waiting]
        if only is not None:
            if only in ids:
                self.lags.append((waiting.pop(ids.index(only))[1], now))
            return
        if upto in ids:
            cut = ids.index(upto) + 1
        elif upto not in self.publisher.acks:  # a runner's event: the state shows ours before it
            cut = len(waiting)
        else:
            return
        self.lags.extend((sent, now) for _, sent in waiting[:cut])
        del waiting[:cut]

    def _on(self, topic: str, payload: bytes, retain: bool) -> None:
        parts = topic.split("/")
        if topic.endswith("/projector/status") and payload:
            status = json.loads(payload)
            self.statuses.append((time.monotonic(), status.get("pid", 0), status.get("status", ""), retain))
        elif len(parts) == 5 and parts[2] == "jobs" and parts[4] == "state" and payload:
            record = json.loads(payload)
            self.states[parts[3]] = record
            self._taken(parts[3], record.get("last_event_id"))
        elif topic.endswith("/rejected") and payload:
            refusal = json.loads(payload)
            eid, job = refusal.get("event_id"), refusal.get("job_id")
            if eid:
                self.rejected[eid] = refusal.get("reason", "")
                if job:
                    self._taken(job, None, only=eid)
        self.changed.set()
        self.changed = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                async with make_client(parse_broker_url(self.url)) as client:
                    for topic in ("jobs/+/state", "rejected", "projector/status"):
                        await client.subscribe(f"mam/{self.ws}/{topic}", qos=1)
                    if not started:
                        started = True
                        task_status.started()
                    async for message in messages(client):
                        payload = message.payload if isinstance(message.payload, bytes) else b""
                        self._on(str(message.topic), payload, bool(message.retain))
            except (aiomqtt.MqttError, OSError):
                await anyio.sleep(0.3)  # the broker is away (a fault): reconnect

    async def retained_states(self, timeout: float = 15) -> dict[str, dict]:
        """Each job's retained state as the broker holds it now: a fresh subscription's retained
        copies, collected until a probe published after the SUBSCRIBE comes back."""
        found: dict[str, dict] = {}
        probe = f"soak/{self.ws}/probe"
        with anyio.fail_after(timeout):
            async with make_client(parse_broker_url(self.url)) as client:
                await client.subscribe(f"mam/{self.ws}/jobs/+/state", qos=1)
                await client.subscribe(probe, qos=1)
                await client.publish(probe, b"end", qos=1)
                async for message in messages(client):
                    topic = str(message.topic)
                    if topic == probe:
                        return found
                    if isinstance(message.payload, bytes) and message.payload:
                        found[topic.split("/")[3]] = json.loads(message.payload)
        return found

    async def live_online(self, pid: int, since: float, timeout: float) -> bool:
        """Wait until the projector `pid` says `online` live (not a retained copy) after `since`."""
        with anyio.move_on_after(timeout):
            while not any(t >= since and p == pid and s == "online" and not r for t, p, s, r in self.statuses):
                await self.changed.wait()
            return True
        return False

    async def online(self, pid: int, timeout: float) -> bool:
        """Wait until the projector `pid` has said `online` (retained or live)."""
        with anyio.move_on_after(timeout):
            while not any(p == pid and s == "online" for _, p, s, _ in self.statuses):
                await self.changed.wait()
            return True
        return False


# --- the jobs ---------------------------------------------------------------------------------------------------


@dataclass
class RunnerJob:
    """A job for `mam-agent --agent shell`: a script whose output is known in advance."""

    job_id: str
    script: str
    expected: str


def runner_job(job_id: str, rng: random.Random) -> RunnerJob:
    """Lines every 0.3-2 s (so arrivals straddle every timeout), or a long output at once."""
    if rng.random() < 0.12:
        n, pad = rng.randint(100, 400), "x" * rng.randint(50, 300)
        script = f'i=0\nwhile [ $i -lt {n} ]; do echo "{job_id} long $i {pad}"; i=$((i+1)); done\n'
        return RunnerJob(job_id, script, "".join(f"{job_id} long {i} {pad}\n" for i in range(n)))
    lines = [f"{job_id} line {i}" for i in range(rng.randint(3, 12))]
    steps = [f"echo '{line}'\nsleep {rng.uniform(0.3, 2.0):.2f}\n" for line in lines]
    return RunnerJob(job_id, "".join(steps), "".join(line + "\n" for line in lines))


def synthetic_events(job_id: str, rng: random.Random) -> tuple[str, list[ev.AnyEvent]]:
    """A job the harness runs itself: its mode and its events in order. It numbers its outputs and
    counts them in its outcome, as mam-agent does, so an output a broker redelivers after the outcome
    (NATS, after its ack_wait) is waited for, not refused (docs/design/contract.md, Time and order)."""
    mode = rng.choice(("ordered", "ordered", "resend", "shuffled", "long"))
    n = rng.randint(20, 60) if mode == "long" else rng.randint(3, 12)
    text = ("y" * rng.randint(2000, 8000) + "\n") if mode == "long" else "synthetic line\n"
    body: list[ev.AnyEvent] = [
        ev.Submitted(id=f"{job_id}-s", prompt=f"soak synthetic {job_id}", agent="soak-synthetic"),
        ev.Claimed(id=f"{job_id}-c", runner="soak-synthetic", runner_key=SYNTHETIC_KEY.public),
        ev.Started(id=f"{job_id}-r", runner="soak-synthetic", counts_outputs=True),
        *(ev.Output(id=f"{job_id}-o{i}", text=f"{i} {text}", seq=i) for i in range(n)),
        ev.Succeeded(id=f"{job_id}-z", exit_code=0, result="ok", outputs=n),
    ]
    return mode, body


def shuffled(body: list[ev.AnyEvent], rng: random.Random) -> list[ev.AnyEvent]:
    """Adjacent events swapped here and there: what a resend after a reconnect or a reordering broker
    produces: `started` after its first output, an output after the next. Never the `submitted` (an
    event before it is parked by design), the `claimed` (a job may start unclaimed, so a `started`
    before its `claimed` is legal and the claim after it is not) nor the terminal event (a runner ends
    a job only after all its output)."""
    out = list(body)
    i = 2
    while i < len(out) - 2:
        if rng.random() < 0.3:
            out[i], out[i + 1] = out[i + 1], out[i]
            i += 2
        else:
            i += 1
    return out


async def run_synthetic(pub: Publisher, mon: Monitor, job_id: str, seed: int) -> str:
    """Publish one synthetic job's events with 0.3-2 s between them (0.01 s for a long output)."""
    rng = random.Random(seed)
    mode, body = synthetic_events(job_id, rng)
    order = shuffled(body, rng) if mode == "shuffled" else body
    if mode == "long":  # its outputs pipelined, as a runner flushes a burst of output
        head, outputs, tail = order[:3], order[3:-1], order[-1:]
        for event in head:
            mon.expect(job_id, event.id)  # type: ignore[arg-type]
            await pub.send(job_id, event)
        for event in outputs:
            mon.expect(job_id, event.id)  # type: ignore[arg-type]
        await pub.send_pipelined(job_id, outputs)
        order = tail
    for event in order:
        mon.expect(job_id, event.id)  # type: ignore[arg-type]
        await pub.send(job_id, event)
        await anyio.sleep(rng.uniform(0.3, 2.0))
    if mode == "resend":  # some of its events again, shuffled, with the same ids
        again = rng.sample(body, k=max(1, len(body) // 2))
        rng.shuffle(again)
        for event in again:
            await pub.send(job_id, event, resend=True)
    return mode
