"""Who may open the dashboard: loopback by default, else a login from a `mam passwd` file (HTTP basic auth)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mam.broker.config import is_loopback
from mam.broker.password_check import PasswordChecker
from mam.contract.errors import UsageError

REALM = 'Basic realm="mam dashboard", charset="UTF-8"'
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def check_exposure(host: str, password_file: Path | None) -> None:
    """A dashboard other machines can reach shows every prompt and cancels jobs: it needs a login."""
    if password_file is None and not is_loopback(host):
        raise UsageError(
            f"--host {host!r} is not a loopback address: the dashboard shows every job and can cancel them, "
            "so it needs a login there: pass --password-file F (create it with `mam passwd F USER`)"
        )


class Logins:
    """The users of a password file (`user:argon2-hash` lines, as `mam passwd` writes them)."""

    def __init__(self, path: Path) -> None:
        self.checker = PasswordChecker.from_file(path)
        self.users = self.checker.users
        self._passed: set[bytes] = set()

    async def check(self, authorization: str | None, address: str | None = None) -> bool:
        """Whether an `Authorization: Basic ...` header names a user and the right password.
        A header that passed once is remembered (as a hash), so argon2 runs once per login;
        the check itself is the broker's (`PasswordChecker`): off the event loop, a bounded
        number at a time, backed off per address and user, as costly for unknown users."""
        if not authorization or not authorization.lower().startswith("basic "):
            return False
        digest = hashlib.sha256(authorization.encode()).digest()
        if digest in self._passed:
            return True
        try:
            user, sep, password = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        ok = await self.checker.check(user, password, address)
        if ok:
            self._passed.add(digest)
        return ok


class RequireLogin:
    """ASGI middleware: every HTTP request carries a valid login, else 401 asks the browser for one."""

    def __init__(self, app: ASGIApp, logins: Logins) -> None:
        self.app = app
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        address = client[0] if client else None
        if scope["type"] == "http" and not await self.logins.check(Headers(scope=scope).get("authorization"), address):
            response = PlainTextResponse("log in to see the dashboard\n", 401, headers={"WWW-Authenticate": REALM})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def host_name(host: str) -> str:
    """A Host header's name without its port: `127.0.0.1:8383` -> `127.0.0.1`, `[::1]:8383` -> `[::1]`."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class LoopbackHosts:
    """ASGI middleware for a dashboard on a loopback address: only loopback host names are answered, so a
    page elsewhere cannot reach it by rebinding its own DNS name to 127.0.0.1. Any other is refused with
    the API's JSON error (400), naming the host sent and the address to use."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            sent = Headers(scope=scope).get("host", "")
            if host_name(sent).lower() not in LOOPBACK_NAMES:
                shown = sent if len(sent) <= 80 else sent[:77] + "..."
                error = (
                    f"host {shown!r} is not answered here: this dashboard listens on a loopback address and "
                    "answers only 127.0.0.1, localhost and [::1] (open it as http://127.0.0.1:PORT/)"
                )
                await JSONResponse({"error": error}, 400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
