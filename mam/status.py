"""The retained presence payloads: projector status (and, later, runner status)."""

from __future__ import annotations

from typing import Final, Literal

import msgspec
from msgspec import Struct


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
    """The raw ed25519 public key that signs the workspace's states, base64 (see `mam.signing`)."""


_decoder: Final = msgspec.json.Decoder(ProjectorStatus)


def decode_projector_status(payload: bytes) -> ProjectorStatus | None:
    try:
        return _decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
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
    back to `started_at`."""


_agent_decoder: Final = msgspec.json.Decoder(AgentStatus)


def decode_agent_status(payload: bytes) -> AgentStatus | None:
    try:
        return _agent_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
