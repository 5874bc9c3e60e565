"""The projector's half of signed states (`mam.contract.signing`): its key pair, and the payload it publishes.

The private key is made at the projector's first start, under its lock,
created with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600 (readable by the
projector's user only), and made durable; the public key is written beside it
(and rewritten if it ever does not match: at start, and at each heartbeat while
the projector runs, `keep_public`, so a deleted `projector.pub` comes back and
runners on this machine can verify the key `projector/status` announces). A
private key that others may read, or a link in its place, stops the projector
with one line saying what to do.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from mam.contract.errors import MamError
from mam.contract.record import JobRecord, encode_record
from mam.contract.signing import (
    PUBLIC_NAME,
    fingerprint,
    key_path,
    public_key_b64,
    public_key_path,
    public_pem,
    sign_payload,
)
from mam.contract.workspace import Workspace
from mam.registry.file_modes import file_mode

log = logging.getLogger("mam.projector")


class StateSigner:
    """Signs the states one workspace's projector publishes; `load()` at start (else at first use)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._key: Ed25519PrivateKey | None = None
        self.public_key_b64: str | None = None
        """What `projector/status` announces (None until loaded)."""
        self.fingerprint: str | None = None
        self._public_pem: bytes | None = None
        self._public_failed = False

    def load(self) -> bool:
        """Load the workspace's key pair, making it if there is none; True if it was made now
        (then every state published before was unsigned, or signed with a key now gone)."""
        key, made = load_or_create(self.workspace)
        self._key = key
        self.public_key_b64 = public_key_b64(key.public_key())
        self.fingerprint = fingerprint(key.public_key())
        self._public_pem = public_pem(key.public_key())
        log.info("states are signed with key %s (%s)", self.fingerprint, public_key_path(self.workspace))
        return made

    def keep_public(self) -> None:
        """Write `projector.pub` again if it is missing or does not hold the key (one small read when it
        does). A failed write is said once, until one succeeds; the projector goes on either way."""
        if self._public_pem is None:
            return
        path = public_key_path(self.workspace)
        try:
            written = _write_public(path, self._public_pem)
        except (MamError, OSError) as exc:
            if not self._public_failed:
                log.warning("%s; runners on this machine cannot verify a new key until it is written", exc)
            self._public_failed = True
            return
        if written:
            log.warning("wrote the projector's public key %s again (it was missing or held another key)", path)
        self._public_failed = False

    def payload(self, record: JobRecord) -> bytes:
        """The retained state payload of a record: its canonical bytes, signed."""
        if self._key is None:
            self.load()
        assert self._key is not None
        return sign_payload(encode_record(record), self._key)

    def signed(self, message: bytes) -> bytes:
        """Any other JSON object the projector publishes (a refusal), signed the same way."""
        if self._key is None:
            self.load()
        assert self._key is not None
        return sign_payload(message.rstrip(b"\n") + b"\n", self._key)


def load_or_create(workspace: Workspace) -> tuple[Ed25519PrivateKey, bool]:
    path = key_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    made = False
    try:
        key = _read_private(path)
    except FileNotFoundError:
        key = Ed25519PrivateKey.generate()
        _create_private(path, key)
        made = True
        log.info("made the workspace's signing key: %s (mode 0600) and %s", path, public_key_path(workspace))
    _write_public(public_key_path(workspace), public_pem(key.public_key()))
    return key, made


def _read_private(path: Path) -> Ed25519PrivateKey:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP: a link in its place
        raise _unusable(path, exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _unusable(path, "not a regular file")
        if info.st_mode & 0o077:
            raise _unusable(path, f"others may read it (mode {stat.S_IMODE(info.st_mode):04o}): `chmod 600` it")
        data = f.read()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise _unusable(path, f"not a PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise _unusable(path, "not an ed25519 key")
    return key


def _unusable(path: Path, why: str) -> MamError:
    return MamError(
        f"cannot use the projector's signing key {path}: {why}; fix it, or remove it and "
        f"{path.with_name(PUBLIC_NAME)} to make a new key pair (runners then need the new key)"
    )


def _create_private(path: Path, key: Ed25519PrivateKey) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno in _DISK_REFUSES:
            raise  # a full or read-only disk: the start says `degraded` and tries again (`start_up.py`)
        raise _unusable(path, exc.strerror or str(exc)) from None
    try:
        os.fchmod(fd, 0o600)
        _write_all(fd, pem)
        os.fsync(fd)
    except OSError as exc:
        _remove(path)  # half a key would be refused at every start after
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)
    _sync_dir(path.parent)


def _write_public(path: Path, pem: bytes) -> bool:
    """Write the public key atomically, unless the file already holds exactly it; True if written."""
    try:
        if path.read_bytes() == pem:
            return False
        log.warning("%s did not hold the projector's public key; rewriting it", path)
    except OSError:
        pass  # absent, or unreadable: replaced below
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.unlink(missing_ok=True)  # left by a crash of an earlier process with this pid
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, file_mode())
        try:
            _write_all(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        _remove(temp)
        if exc.errno in _DISK_REFUSES:
            raise OSError(exc.errno, exc.strerror, str(path)) from None  # said as a full disk is (`start_up.py`)
        raise MamError(f"cannot write the projector's public key {path}: {exc.strerror or exc}") from None
    _sync_dir(path.parent)
    return True


_DISK_REFUSES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
"""A full, read-only or failing disk (`mam.projector.start_up.STORAGE_ERRNOS`): raised as `OSError`, not as an
unusable key."""


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["StateSigner", "load_or_create"]
