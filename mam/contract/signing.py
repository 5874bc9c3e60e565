"""Signed states: the projector signs every state it publishes; readers act only on what verifies.

The contract (docs/design/projector.md, "Signed states"):

- The workspace's key pair is ed25519, beside the registry dir like the
  runtime file (`<root>/.mam/` in the usual layout): `projector.key` (PKCS#8
  PEM, mode 0600, made by the projector at its first start) and
  `projector.pub` (SubjectPublicKeyInfo PEM). The projector's retained
  `projector/status` carries the raw public key, base64 (`public_key`).
- A key's fingerprint is `sha256:<hex>` of its raw 32 bytes.
- A state's payload is the record's canonical bytes (`encode_record`, which end
  with `}\\n`) with `,"signature":"<S>"` inserted before the final `}`: S is
  the ed25519 signature over the canonical bytes, base64url without padding
  (always 86 characters). The member is always last and always the same
  length, so a reader cuts it at a fixed offset from the end, rebuilds the
  canonical bytes and verifies them; it then decodes those bytes, never the
  rest. Registry files are not signed (the projector alone writes them).
- A remade key: a reader that follows the workspace's key (`StateReader.adopt`)
  takes the key `projector/status` announces only once the workspace's
  `projector.pub`, read again from disk, holds that same key; the status
  alone (which anyone may publish on a broker without ACLs) never switches it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from mam.contract.errors import UsageError
from mam.contract.nesting import decode
from mam.contract.record import JobRecord, decode_record
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace

log = logging.getLogger("mam.client")

KEY_NAME: Final = "projector.key"
PUBLIC_NAME: Final = "projector.pub"
FINGERPRINT_PREFIX: Final = "sha256:"
_FINGERPRINT: Final = re.compile(r"sha256:[0-9a-f]{64}")
_MEMBER: Final = b',"signature":"'
_SIGNATURE_CHARS: Final = 86
"""base64url of 64 bytes, unpadded."""
_END: Final = b'"}\n'
_SUFFIX: Final = len(_MEMBER) + _SIGNATURE_CHARS + len(_END)
MAX_WARNED: Final = 10_000
"""Jobs a reader names in a warning; past that it ignores unverifiable states without a word."""


class BadSignature(ValueError):
    """A payload that is not a state the projector signed with the key at hand; the message says why."""


def key_path(workspace: Workspace) -> Path:
    return workspace.registry_dir.parent / KEY_NAME


def public_key_path(workspace: Workspace) -> Path:
    return workspace.registry_dir.parent / PUBLIC_NAME


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey) -> str:
    return FINGERPRINT_PREFIX + hashlib.sha256(raw_public(key)).hexdigest()


def public_key_b64(key: Ed25519PublicKey) -> str:
    """The raw public key, standard base64: what `projector/status` carries."""
    return base64.b64encode(raw_public(key)).decode("ascii")


def public_key_from_b64(text: str) -> Ed25519PublicKey:
    """Raise ValueError unless `text` is 32 raw bytes, base64."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64: {exc}") from None
    if len(raw) != 32:
        raise ValueError(f"an ed25519 public key is 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def parse_fingerprint(text: str) -> str | None:
    """`sha256:<64 hex digits>` (normalized to lower case), or None if `text` is not one."""
    text = text.strip().lower()
    return text if _FINGERPRINT.fullmatch(text) else None


def load_public_key(path: Path) -> Ed25519PublicKey:
    """A public key from a file: PEM (like `projector.pub`), or the base64 line `projector/status` carries.

    Raises OSError or ValueError."""
    data = path.read_bytes()
    if data.lstrip().startswith(b"-----BEGIN"):
        key = serialization.load_pem_public_key(data)
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("not an ed25519 public key")
        return key
    return public_key_from_b64(data.decode("ascii", errors="replace"))


def load_workspace_key(workspace: Workspace) -> Ed25519PublicKey | None:
    """The workspace's public key from `projector.pub`, or None if the projector never made one.

    Raises UsageError if the file is there but unreadable."""
    path = public_key_path(workspace)
    try:
        return load_public_key(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read the projector's public key {path}: {detail}") from None


def _b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def sign_payload(canonical: bytes, key: Ed25519PrivateKey) -> bytes:
    """The signed state payload for a record's canonical bytes."""
    if not canonical.endswith(b"}\n"):
        raise ValueError("canonical record bytes end with '}\\n'")
    return canonical[:-2] + _MEMBER + _b64url(key.sign(canonical)) + _END


def verify_payload(payload: bytes, key: Ed25519PublicKey) -> bytes:
    """The canonical bytes a signed payload carries, once its signature verifies; else BadSignature."""
    cut = len(payload) - _SUFFIX
    if cut < 1 or not payload.endswith(_END) or payload[cut : cut + len(_MEMBER)] != _MEMBER:
        raise BadSignature("no signature")
    text = payload[cut + len(_MEMBER) : -len(_END)]
    try:
        signature = base64.urlsafe_b64decode(text + b"==")
    except (binascii.Error, ValueError):
        signature = b""
    if len(signature) != 64 or _b64url(signature) != text:
        raise BadSignature("a malformed signature")
    canonical = payload[:cut] + b"}\n"
    try:
        key.verify(signature, canonical)
    except InvalidSignature:
        raise BadSignature(f"a signature that does not verify with the projector's key {fingerprint(key)}") from None
    return canonical


Warn = Callable[[str, str], None]
"""Called with (job id, why) the first time a job's state does not verify."""


def _warn_client(job_id: str, why: str) -> None:
    log.warning("ignoring a state of job %r that carries %s", job_id, why)


_any: Final = msgspec.json.Decoder()


class StateReader:
    """What a reader of `state` topics may act on: the verified record, or None (ignored).

    With a key, a payload counts only if its signature verifies and the record
    it carries is the job and workspace of the topic it came on; the first
    failure for a job is reported through `warn`, later ones are not. Without
    a key (none available locally), states are taken as they come.
    """

    def __init__(self, workspace_id: str, key: Ed25519PublicKey | None, *, warn: Warn = _warn_client) -> None:
        self.topics = Topics(workspace_id)
        self.key = key
        self.warn = warn
        self._warned: set[str] = set()
        self._refused_keys: set[str] = set()
        """Fingerprints of announced keys `adopt` did not take: said once each."""

    @classmethod
    def for_workspace(cls, workspace: Workspace, *, warn: Warn = _warn_client) -> StateReader:
        """With the workspace's key if the projector made one on this machine."""
        return cls(workspace.id, load_workspace_key(workspace), warn=warn)

    def adopt(self, announced: str, workspace: Workspace) -> tuple[bool, str | None]:
        """Take the key `projector/status` announces (`public_key`, base64) if the workspace's
        `projector.pub`, read again now, holds it (each announcement is checked: the file may be
        written after the status came). Returns (switched, what to log): nothing to log for the key
        in use, nor for a key refused before (each refused key is said once)."""
        try:
            key = public_key_from_b64(announced)
        except ValueError:
            return False, None
        if self.key is not None and raw_public(key) == raw_public(self.key):
            return False, None
        seen = fingerprint(key)
        try:
            on_disk = load_workspace_key(workspace)
        except UsageError as exc:
            on_disk, why = None, str(exc)
        else:
            why = f"{public_key_path(workspace)} " + (
                "does not exist" if on_disk is None else f"holds key {fingerprint(on_disk)}"
            )
        if on_disk is None or raw_public(on_disk) != raw_public(key):
            if seen in self._refused_keys or len(self._refused_keys) >= MAX_WARNED:
                return False, None
            self._refused_keys.add(seen)
            return False, f"ignoring key {seen} announced on projector/status: {why}"
        self.key = key
        self._warned.clear()
        self._refused_keys.discard(seen)
        return True, f"the projector's key is now {seen} (announced, and held by {public_key_path(workspace)})"

    def record(self, topic: str, payload: bytes) -> JobRecord | None:
        parsed = self.topics.parse(topic)
        if parsed is None or parsed.kind is not Kind.STATE or parsed.job_id is None or not payload:
            return None
        if self.key is None:
            try:
                return decode_record(payload)
            except Exception:  # noqa: BLE001 - a state that cannot be read is no state, whatever the fault
                return None
        try:
            return self._verified(parsed.job_id, payload, self.key)
        except BadSignature as exc:
            self._refuse(parsed.job_id, str(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - signed, yet not readable here: said once, like a bad signature
            self._refuse(parsed.job_id, f"a state that cannot be read ({type(exc).__name__}: {exc})")
            return None

    def refusal(self, payload: bytes) -> dict[str, object] | None:
        """A refusal from `rejected`: verified like a state when there is a key, else as it comes."""
        if self.key is not None:
            try:
                payload = verify_payload(payload, self.key)
            except BadSignature as exc:
                self._refuse("(a refusal)", str(exc))
                return None
            except Exception:  # noqa: BLE001 - what verification cannot even read is no refusal
                return None
        try:
            refusal = decode(_any, payload)
        except Exception:  # noqa: BLE001 - a refusal that cannot be read is none
            return None
        return refusal if isinstance(refusal, dict) else None

    def _verified(self, job_id: str, payload: bytes, key: Ed25519PublicKey) -> JobRecord:
        canonical = verify_payload(payload, key)
        try:
            record = decode_record(canonical)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadSignature(f"a signed payload that is not a record ({exc})") from None
        if record.job_id != job_id:
            raise BadSignature(f"the projector's signature for job {record.job_id!r}, not for this topic's job")
        if record.workspace != self.topics.workspace:
            raise BadSignature(f"the projector's signature for workspace {record.workspace!r}, not this one")
        return record

    def _refuse(self, job_id: str, why: str) -> None:
        if job_id in self._warned or len(self._warned) > MAX_WARNED:
            return
        self._warned.add(job_id)
        if len(self._warned) > MAX_WARNED:
            why += f"; more than {MAX_WARNED} jobs had such states: the next ones are ignored without a word"
        self.warn(job_id, why)


__all__ = [
    "KEY_NAME",
    "PUBLIC_NAME",
    "BadSignature",
    "StateReader",
    "fingerprint",
    "key_path",
    "load_public_key",
    "load_workspace_key",
    "parse_fingerprint",
    "public_key_b64",
    "public_key_from_b64",
    "public_key_path",
    "public_pem",
    "sign_payload",
    "verify_payload",
]
