"""The edge: one MQTT message in, an accepted event or a rejection with a reason out."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from msgspec import UNSET
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.errors import InvalidId
from mam.contract.ids import validate_job_id
from mam.contract.payload_checks import EventError
from mam.contract.topics import Kind, ParsedTopic, Topics

MAX_CLOCK_SKEW = timedelta(hours=1)
"""An event stamped further ahead of the projector's clock than this is refused."""

PAYLOAD_EXCERPT_BYTES = 2048
TOPICS_REMEMBERED = 4096
"""Topics whose parse (and job id check) is remembered: every event of a job arrives on the same topic."""


@dataclass(frozen=True, slots=True)
class Accepted:
    job_id: str
    event: ev.AnyEvent
    event_id: str
    signed: bytes | None = None
    """The payload as it came, when it carried a runner's signature (`sig`, stripped from `event`):
    checked against the key of the job's claim (`projector/identity.py`)."""


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    job_id: str | None = None
    event_id: str | None = None


def ingest(topic: str, payload: bytes, topics: Topics, now: datetime, *, retained: bool = False) -> Accepted | Refused:
    """Validate one message on an events topic; never raises for bad input."""
    job_id = _events_topic_job(topics, topic)
    if isinstance(job_id, Refused):
        return job_id
    if retained:
        return Refused("events must be published without the retain flag", job_id=job_id)
    try:
        event = ev.decode_event(payload)
    except EventError as exc:
        return Refused(str(exc), job_id=job_id)
    if event.job_id is not None and event.job_id != job_id:
        return Refused(
            f"payload job_id {event.job_id!r} contradicts the topic's job id {job_id!r}; the topic is authoritative",
            job_id=job_id,
            event_id=event.id,
        )
    kind = ev.event_type(event)
    if kind in ev.DERIVED_TYPES:
        return Refused(f"{kind!r} events are derived by the projector and cannot be published", job_id, event.id)
    if event.ts is not None:
        ts = event.ts if event.ts.tzinfo is not None else event.ts.replace(tzinfo=now.tzinfo)
        if ts - now > MAX_CLOCK_SKEW:
            return Refused(
                f"event ts {event.ts.isoformat()} is more than {MAX_CLOCK_SKEW} ahead of the projector's clock",
                job_id,
                event.id,
            )
    event_id = event.id or f"p-{uuid.uuid4().hex}"
    if isinstance(event.sig, str):
        event = replace(event, id=event_id, job_id=job_id, sig=UNSET)
        return Accepted(job_id=job_id, event=event, event_id=event_id, signed=payload)
    return Accepted(job_id=job_id, event=replace(event, id=event_id, job_id=job_id), event_id=event_id)


@functools.lru_cache(maxsize=TOPICS_REMEMBERED)
def parse_topic(topics: Topics, topic: str) -> ParsedTopic | None:
    """`topics.parse(topic)`, remembered."""
    return topics.parse(topic)


@functools.lru_cache(maxsize=TOPICS_REMEMBERED)
def _events_topic_job(topics: Topics, topic: str) -> str | Refused:
    """The valid job id of an events topic, or why the topic is refused; remembered."""
    parsed = parse_topic(topics, topic)
    if parsed is None or parsed.kind is not Kind.EVENTS or parsed.job_id is None:
        return Refused(f"topic {topic!r} is not an events topic of workspace {topics.workspace!r}")
    try:
        return validate_job_id(parsed.job_id)
    except InvalidId as exc:
        return Refused(f"topic job id refused: {exc}")


def excerpt(payload: bytes) -> str:
    """A printable, bounded excerpt of a refused payload."""
    text = payload[:PAYLOAD_EXCERPT_BYTES].decode("utf-8", errors="replace").replace("\x00", "\\x00")
    return text + ("..." if len(payload) > PAYLOAD_EXCERPT_BYTES else "")
