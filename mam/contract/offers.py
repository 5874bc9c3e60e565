"""Offers: the projector's message to one runner that a job is its to claim (docs/design/runners.md, Dispatch).

Published on `mam/<ws>/agents/<agent_id>/offers`, QoS 1, not retained, signed with the projector's key as
refusals are (`mam.contract.signing`). An offer names the job, the version to claim it at, the runner instance it is
for (`agent_id`, `epoch`) and its lease; it starts nothing: the runner's claim (with that version as
`expected_version`) is judged as every claim is, so an offer lost or taken late costs at most a lease.
"""

from __future__ import annotations

from typing import Final

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from msgspec import Struct

from mam.contract.nesting import decode
from mam.contract.signing import verify_payload


class Offer(Struct, frozen=True, kw_only=True):
    job_id: str
    agent: str
    """The job's agent name (its queue)."""
    agent_id: str
    """The runner offered the job."""
    epoch: str
    """That runner instance's epoch: a restarted runner of the same id ignores its predecessor's offers."""
    version: int
    """The job's version when offered: the claim's `expected_version`."""
    attempt: int
    lease: float
    """Seconds the offer stands; then the projector offers the job to the next runner."""


_decoder: Final = msgspec.json.Decoder(Offer)


def encode_offer(offer: Offer) -> bytes:
    return msgspec.json.encode(offer) + b"\n"


def read_offer(payload: bytes, key: Ed25519PublicKey | None) -> Offer | None:
    """The offer a payload carries once its signature verifies with the projector's `key`; else None."""
    if key is None:
        return None
    try:
        return decode(_decoder, verify_payload(payload, key))
    except Exception:  # noqa: BLE001 - an offer that does not verify or read is no offer (BadSignature, ...)
        return None


__all__ = ["Offer", "encode_offer", "read_offer"]
