"""Runner identity: a job's outcome comes only from the runner that claimed it.

The contract (docs/design/runners.md, "Runner identity"):

- Each runner instance makes an ed25519 key pair in memory at start (never
  written anywhere). Its `claimed` events name the public key (`runner_key`,
  the raw 32 bytes, standard base64, as `projector/status` carries the
  projector's) and so does its retained status (online and will).
- Every event it publishes after that, and every status (its will included),
  is signed: the payload is the event's (status's) canonical bytes, a JSON
  object as msgspec writes it, with `,"sig":"<S>"` inserted before the final
  `}`. S is the signature, base64url without padding (86 characters), over
  `b"mam workspace event\\n" + workspace + b"\\n" + job_id + b"\\n" + canonical`
  for an event (so a signed event of one job cannot be replayed on another's
  topic, nor in another workspace) and `b"mam runner status\\n" + canonical`
  for a status. Runners before the workspace was signed (the old form, still
  taken during a transition: `projector/identity.py`) signed
  `b"mam event\\n" + job_id + b"\\n" + canonical`. The member is always
  last and of fixed length, so a reader cuts it at a fixed offset from the
  end and verifies the bytes exactly as the runner wrote them, fields this
  release does not know included.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from mam.contract.signing import BadSignature, public_key_b64, public_key_from_b64

_MEMBER: Final = b',"sig":"'
_SIGNATURE_CHARS: Final = 86
_END: Final = b'"}'
_SUFFIX: Final = len(_MEMBER) + _SIGNATURE_CHARS + len(_END)
_EVENT: Final = b"mam event\n"
_WORKSPACE_EVENT: Final = b"mam workspace event\n"
_STATUS: Final = b"mam runner status\n"


def event_context(job_id: str, workspace: str | None = None) -> bytes:
    """What an event's signature covers before its bytes: the workspace and the job; without a workspace,
    the old form (the job alone), which a signed event of one workspace could be replayed in another with."""
    if workspace is None:
        return _EVENT + job_id.encode() + b"\n"
    return _WORKSPACE_EVENT + workspace.encode() + b"\n" + job_id.encode() + b"\n"


STATUS_CONTEXT: Final = _STATUS


class RunnerKey:
    """A runner instance's key pair: signs its events and statuses; `public` goes in its claims."""

    def __init__(self, key: Ed25519PrivateKey | None = None) -> None:
        self.key = key or Ed25519PrivateKey.generate()
        self.public = public_key_b64(self.key.public_key())

    def sign(self, canonical: bytes, context: bytes) -> bytes:
        """`canonical` (a JSON object) with its `sig` member appended."""
        if not canonical.endswith(b"}") or canonical == b"{}":
            raise ValueError("a signed payload is a non-empty JSON object")
        signature = base64.urlsafe_b64encode(self.key.sign(context + canonical)).rstrip(b"=")
        return canonical[:-1] + _MEMBER + signature + _END

    def sign_event(self, job_id: str, canonical: bytes, workspace: str | None = None) -> bytes:
        """An event of `job_id` in `workspace`, signed; without a workspace in the old form (`event_context`)."""
        return self.sign(canonical, event_context(job_id, workspace))


def is_signed(payload: bytes) -> bool:
    """Whether `payload` ends with a `sig` member of the right shape (not whether it verifies)."""
    cut = len(payload) - _SUFFIX
    return cut >= 1 and payload.endswith(_END) and payload[cut : cut + len(_MEMBER)] == _MEMBER


@functools.lru_cache(maxsize=1024)
def _public(key_b64: str) -> Ed25519PublicKey:
    """A runner key, parsed once (every event of its jobs is checked against it)."""
    return public_key_from_b64(key_b64)


def verify(payload: bytes, key_b64: str, context: bytes) -> None:
    """Return if `payload`'s `sig` verifies with the runner key `key_b64`; else raise BadSignature (why)."""
    if not is_signed(payload):
        raise BadSignature("it carries no signature")
    cut = len(payload) - _SUFFIX
    text = payload[cut + len(_MEMBER) : -len(_END)]
    try:
        signature = base64.urlsafe_b64decode(text + b"==")
        key = _public(key_b64)
    except (binascii.Error, ValueError):
        raise BadSignature("its signature or the key is malformed") from None
    try:
        key.verify(signature, context + payload[:cut] + b"}")
    except InvalidSignature:
        raise BadSignature("its signature does not verify") from None


__all__ = ["STATUS_CONTEXT", "BadSignature", "RunnerKey", "event_context", "is_signed", "verify"]
