"""The retained presence payloads: projector status (and, later, runner status)."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

from mam.contract.nesting import decode


class ProjectorStatus(Struct, frozen=True, kw_only=True):
    status: Literal["online", "offline", "degraded"]
    workspace: str
    pid: int
    host: str
    version: str
    started_at: str
    registry_dir: str
    logs_dir: str
    broker: str
    durability: str = "fsync"
    detail: str | None = None
    public_key: str | None = None
    """The raw ed25519 public key that signs the workspace's states, base64 (see `mam.contract.signing`)."""
    heartbeat_at: str | None = None
    """When the projector published this status; it republishes it every `heartbeat_every` seconds."""
    heartbeat_every: float | None = None
    dispatch: str | None = None
    """`offers`: this projector offers each claimable job to one runner at a time (`projector/dispatch.py`),
    and a runner that takes offers claims only what it is offered. Absent from an older projector: runners
    then claim from the states."""
    offer_lease: float | None = None
    """Seconds an offer waits for its runner's claim before the job goes to the next runner."""
    job_logins: bool | None = None
    """True: the broker takes jobs' own logins (`mam up` with a password file, `mam.contract.job_login`), so a
    runner hands each job a login scoped to it instead of its own password. Null elsewhere (absent: an older one)."""
    event_signatures: str | None = None
    """`workspace`: this projector checks a runner's event signatures over the workspace as well as the job
    (`mam.contract.identity`), and a runner signs its events so. Null (absent: an older projector, which reads
    only the old form, over the job alone): a runner signs the old way."""
    set_aside: int | None = None
    """Messages set aside and not handled since, whenever that was (the lines of `<logs>/_set_aside.jsonl`, so the
    count holds across restarts): their fold failed (a bug, not a refusal) `projector/set_aside.py`'s number of
    times. Null while there are none. `detail` (while `online`) says how many and why."""
    set_aside_reasons: list[str] | None = None
    """Why, while any are set aside: each distinct reason (the exception), the most frequent first with `(N)` when
    more than one gives it, at most 5."""


STALE_BEATS: Final = 3
"""A status not republished for this many heartbeat intervals is stale."""


def heartbeat_age(status: ProjectorStatus, now: datetime) -> float | None:
    """Seconds since the projector last republished its status (`None`: it does not say)."""
    if status.heartbeat_at is None:
        return None
    try:
        at = datetime.fromisoformat(status.heartbeat_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return (now - at).total_seconds()


def stale(status: ProjectorStatus, now: datetime) -> bool:
    """An `online` (or `degraded`) status its projector stopped refreshing: it, or the broker node
    that held its will, is gone. A projector that sends no heartbeat is never judged stale."""
    if status.status == "offline" or not status.heartbeat_every or status.heartbeat_every <= 0:
        return False
    age = heartbeat_age(status, now)
    return age is not None and age > STALE_BEATS * status.heartbeat_every


def describe_heartbeat(status: ProjectorStatus, now: datetime) -> str:
    """`48s ago (heartbeat every 10s)`, for messages about a status."""
    age = heartbeat_age(status, now)
    if age is None:
        return "at an unknown time (no heartbeat)"
    every = f" (heartbeat every {status.heartbeat_every:g}s)" if status.heartbeat_every else ""
    return f"{max(age, 0):.0f}s ago{every}"


_decoder: Final = msgspec.json.Decoder(ProjectorStatus)


def decode_projector_status(payload: bytes) -> ProjectorStatus | None:
    try:
        return decode(_decoder, payload)
    except Exception:  # noqa: BLE001 - a status from the broker that cannot be read is no status
        return None


def encode(value: Struct) -> bytes:
    return msgspec.json.encode(value)


class AgentStatus(Struct, frozen=True, kw_only=True):
    """A runner's retained presence; the will carries the same epoch, marked offline."""

    status: Literal["online", "offline"]
    agent: str
    agent_id: str
    epoch: str
    pid: int
    host: str
    started_at: str
    concurrency: int = 1
    jobs: list[str] = []
    updated_at: str | None = None
    """When the runner published this status (a will: when it connected); optional, readers fall
    back to `started_at`. It moves with every republish (a job claimed or ended): it is not SINCE
    (`mam.contract.presence.since`)."""
    runner_key: str | UnsetType = UNSET
    """The instance's public key (base64), the one its claims name; absent from a runner that does not sign."""
    aliases: list[str] | UnsetType = UNSET
    """Other agent names whose jobs it claims (`.mam/profiles.json` aliases of its agent); absent when none."""
    state: str | UnsetType = UNSET
    """What an `online` runner is doing beyond serving: `draining` once it was asked to stop (SIGTERM,
    SIGINT): it claims nothing more and lets its jobs finish. Absent while it serves, so older readers
    keep their bytes; a value a reader does not know is shown as it is."""
    offers: bool | UnsetType = UNSET
    """True: this runner claims only the jobs a dispatching projector offers it (on
    `agents/<agent_id>/offers`); absent from an older runner, which claims from the states."""
    labels: dict[str, str] | UnsetType = UNSET
    """What the runner can do (`mam-agent --label key=value`): a job's `require` must be among them."""
    online_since: str | UnsetType = UNSET
    """When the runner came online on its current connection (its will carries the same time): an online
    runner's SINCE. The republishes as its jobs change leave it; a reconnect after a lost broker (whose will
    said offline meanwhile) moves it. Absent from an older runner: readers fall back to `started_at`."""
    will: bool | UnsetType = UNSET
    """True on the runner's will: the offline status the broker publishes for it when its connection is lost
    without a stop (killed, its host or network gone). Written when it connected, it cannot say when the
    runner went offline. Absent from every status the runner publishes itself."""
    sig: str | UnsetType = UNSET
    """Its signature (`mam.contract.identity`), the payload's last member: a status (a will above all) of a runner
    holding a job claimed with a key counts only if it verifies with that key."""


_agent_decoder: Final = msgspec.json.Decoder(AgentStatus)


def decode_agent_status(payload: bytes) -> AgentStatus | None:
    try:
        return decode(_agent_decoder, payload)
    except Exception:  # noqa: BLE001 - a presence from the broker that cannot be read is no presence
        return None
