"""Checking passwords without handing anyone a lever on the process that serves everyone.

An argon2 check costs about 64 MiB and a few hundred milliseconds of CPU. Done on the
event loop (amqtt's `FileAuthPlugin`) a loop of wrong-password CONNECTs stalls every
client's keep-alive; done in unbounded threads (60 parallel dashboard logins) it costs
gigabytes. So here:

- checks run in worker threads, at most `CONCURRENT_CHECKS` at a time (memory is
  checks x 64 MiB), never on the event loop;
- one check at a time per address and per user name (others wait for it), and a failed
  check backs off both: the next check for either waits `BACKOFF_BASE * 2**(failures-1)`
  seconds, at most `BACKOFF_CAP`. An attempt inside that window waits it out (idle: no
  thread, no hash) and is then checked, unless another attempt took the check and failed
  meanwhile: then it is answered "no" unchecked. Many connections guessing at once get
  one check per window between them; a typo followed by the right password just waits
  the window. A successful check clears both;
- an unknown user is checked against a dummy hash with the parameters of the file's
  hashes, so it costs (and takes) what a known one does: answer times name no users;
- a password that passed once is remembered as a SHA-256 digest, so clients that
  reconnect with it (runners, `mam submit`) pay a hash, not argon2, and get in even
  while an attacker keeps their user name backed off.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from amqtt.plugins.authentication import DeprecatedSHA512CryptHasher
from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session
from pwdlib import PasswordHash
from pwdlib.exceptions import UnknownHashError
from pwdlib.hashers.argon2 import Argon2Hasher

from mam.broker.passwords import check_password_file
from mam.contract.job_login import is_job_user

CONCURRENT_CHECKS = 2
BACKOFF_BASE = 0.25
BACKOFF_CAP = 8.0
MOST_TRACKED = 10_000
"""Addresses and user names remembered for back-off; the oldest are forgotten beyond this."""

_ARGON2 = re.compile(r"^(\$argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$)")


@dataclass
class _Failures:
    count: int = 0
    until: float = 0.0
    busy: anyio.Event | None = None
    """Set while a check for this address or user runs."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode().rstrip("=")


def dummy_hash(stored: list[str]) -> str:
    """A hash no password matches, with the argon2 parameters of the first argon2 hash in
    `stored` (or of `mam passwd`'s defaults), so verifying against it costs the same."""
    for value in stored:
        match = _ARGON2.match(value)
        if match:
            return f"{match.group(1)}{_b64(os.urandom(16))}${_b64(os.urandom(32))}"
    return Argon2Hasher().hash(os.urandom(16).hex())


def read_users(path: Path) -> dict[str, str]:
    """`user:hash` lines (comments and blank lines skipped), after `check_password_file`."""
    check_password_file(path)
    users: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and ":" in line:
            user, stored = line.split(":", 1)
            users[user] = stored
    return users


class PasswordChecker:
    """The users of a password file, checked off the event loop with bounds (module docstring)."""

    def __init__(self, users: dict[str, str], *, concurrent: int = CONCURRENT_CHECKS) -> None:
        self.users = users
        self.dummy = dummy_hash(list(users.values()))
        self.hasher = PasswordHash((Argon2Hasher(), DeprecatedSHA512CryptHasher()))
        self.limiter = anyio.CapacityLimiter(concurrent)
        self.by_address: dict[str, _Failures] = {}
        self.by_user: dict[str, _Failures] = {}
        self.passed: set[bytes] = set()
        self.verified = 0
        """argon2 checks run (known users and the dummy alike): what a test can count."""

    @classmethod
    def from_file(cls, path: Path) -> PasswordChecker:
        return cls(read_users(path))

    async def check(self, user: str, password: str, address: str | None) -> bool:
        """Whether `password` is `user`'s; see the module docstring for the bounds."""
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        keys = [(self.by_address, address or "?"), (self.by_user, user)]
        waited = False
        while True:
            if digest in self.passed:
                return True
            entries = [table[key] for table, key in keys if key in table]
            busy = next((entry.busy for entry in entries if entry.busy is not None), None)
            if busy is not None:  # one check at a time per address and per user: wait for it, then look again
                await busy.wait()
                continue
            wait = max((entry.until for entry in entries), default=0.0) - time.monotonic()
            if wait <= 0:
                break
            if waited:  # it waited out a window and another check failed meanwhile: no check for it
                return False
            await anyio.sleep(min(wait, BACKOFF_CAP))  # backed off: the attempt waits idle, no thread
            waited = True
        done = anyio.Event()
        held = [self._entry(table, key) for table, key in keys]
        for entry in held:
            entry.busy = done
        ok = False
        try:
            stored = self.users.get(user)
            verified = await anyio.to_thread.run_sync(
                self._verify, password, stored or self.dummy, limiter=self.limiter
            )
            ok = verified and stored is not None
        finally:
            now = time.monotonic()
            for entry in held:
                entry.busy = None
                if not ok:
                    entry.count += 1
                    entry.until = now + self._delay(entry.count)
            if ok:
                self.passed.add(digest)
                self._forget(address, user)
            done.set()
        return ok

    @staticmethod
    def _entry(table: dict[str, _Failures], key: str) -> _Failures:
        """`key`'s entry, moved last (the most recent); the oldest idle ones beyond `MOST_TRACKED` are forgotten."""
        entry = table.pop(key, None) or _Failures()
        table[key] = entry
        for old in [k for k, e in table.items() if e.busy is None][: max(0, len(table) - MOST_TRACKED)]:
            del table[old]
        return entry

    def _forget(self, address: str | None, user: str) -> None:
        self.by_address.pop(address or "?", None)
        self.by_user.pop(user, None)

    @staticmethod
    def _delay(failures: int) -> float:
        return min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(failures - 1, 16))

    def _verify(self, password: str, stored: str) -> bool:
        self.verified += 1
        try:
            return self.hasher.verify(password, stored)
        except (UnknownHashError, ValueError):
            return False


class PasswordAuthPlugin(BaseAuthPlugin):
    """amqtt's authentication hook for a `mam passwd` file, in place of amqtt's `FileAuthPlugin`
    (which runs argon2 on the event loop, and only for user names it knows)."""

    @dataclass
    class Config:
        password_file: str = ""

    def __init__(self, context: object) -> None:
        super().__init__(context)  # type: ignore[arg-type]
        self.checker = PasswordChecker.from_file(Path(self.config.password_file))

    async def authenticate(self, *, session: Session) -> bool | None:
        if session is None or not session.username:
            return False
        if is_job_user(session.username):
            return None  # a job's login (no file's user: `mam passwd` refuses ':'): `JobLoginPlugin` decides, if any
        return await self.checker.check(session.username, session.password or "", session.remote_address)
