"""How mam says a lost broker: in its own words, and once an outage, not once an attempt.

Every process that rides out a lost broker says it through here: the runner and the projector in
their logs, the commands that follow something on stderr (`reconnecting.py`), a command's "cannot
reach" error and the dashboard's and the MCP server's warnings (`mqtt.unreachable`). `why` turns what
aiomqtt, paho-mqtt or the socket raised ("Disconnected during message iteration", "[Errno 111]
Connection refused", "[code:128] Unspecified error") into a few words a person acts on ("connection
refused", "the connection dropped"); `Outage` gives the line that begins an outage and the one that
ends it, and nothing for the attempts in between (those are debug lines, `-v`).

Inside a job (`$MAM_JOB_ID` set: what a command prints there is the job's output) only the line that
begins an outage is said (`inside_job`): the job's output then reads as the job's, with one line per
outage.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import time

_ERRNO = re.compile(r"^\[Errno (-?\d+)\]\s*")
_CODE = re.compile(r"^\[code:(-?\d+)\]\s*(.*)$", re.DOTALL)

_BY_ERRNO = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "the connection was reset",
    errno.ECONNABORTED: "the connection was aborted",
    errno.EPIPE: "the connection was closed while sending",
    errno.ETIMEDOUT: "the connection timed out",
    errno.EHOSTUNREACH: "no route to the host",
    errno.ENETUNREACH: "the network is unreachable",
    errno.ENETDOWN: "the network is down",
    errno.EHOSTDOWN: "the host is down",
    errno.EADDRNOTAVAIL: "the address is not available",
}
_NAME_LOOKUP = "cannot resolve the host name"

LIBRARY_TEXTS = {  # lower case: what a library says -> what mam says
    # aiomqtt's own texts (aiomqtt/client.py), and mam's inbox's older one
    "disconnected during message iteration": "the connection dropped",
    "unexpected disconnection": "the connection dropped",
    "operation timed out": "the broker did not answer in time",
    # paho's error strings (`paho.mqtt.client.error_string`)
    "the client is not currently connected.": "the connection dropped",
    "the connection was refused.": "the broker refused the connection",
    "a network protocol error occurred when communicating with the broker.": "the broker broke the MQTT protocol",
    "client or broker did not communicate in the keepalive interval.": "the broker stopped answering (keepalive)",
    "authorisation failed.": "not authorised",
    "access denied by acl.": "the broker's ACL denies it",
    "a tls error occurred.": "TLS failed",
    "unknown error.": "an unknown error",
    # MQTT reason codes as paho names them (a DISCONNECT's or a lost connection's)
    "unspecified error": "the connection dropped",
    "the connection was lost.": "the connection dropped",
    "keep alive timeout": "the broker stopped answering (keepalive)",
    "server shutting down": "the broker is shutting down",
    "session taken over": "another client took over this client's session (the same client id)",
    "not authorized": "not authorised",
    "not authorised": "not authorised",
    "bad user name or password": "bad user name or password",
    "server unavailable": "the broker is unavailable",
    "server busy": "the broker is busy",
    "administrative action": "the broker's administrator closed the connection",
    "connection refused: not authorised": "not authorised",
    "connection refused: bad username or password": "bad user name or password",
    "connection refused: server unavailable": "the broker is unavailable",
}


def why(exc: BaseException) -> str:
    """What went wrong with a connection, in mam's words: a library's wording and codes translated, the
    cause it chained looked at when it says more; a message of mam's own is kept as it is."""
    seen: set[int] = set()
    current: BaseException | None = exc
    found = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        words = _words(current)
        if words and (not found or found == "the connection dropped"):
            found = words
        if found and found != "the connection dropped":
            break
        current = current.__cause__
    return found or type(exc).__name__


def _words(exc: BaseException) -> str:
    """`exc` in mam's words, or "" for an exception that says nothing."""
    failures = getattr(exc, "failures", None)  # several brokers, each its own (`failover.NoBrokerAnswered`)
    if isinstance(failures, list) and failures:
        return "; ".join(f"{address.url}: {why(inner)}" for address, inner in failures)
    if isinstance(exc, socket.gaierror):
        return _NAME_LOOKUP
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno in _BY_ERRNO:
        return _BY_ERRNO[exc.errno]
    text = str(exc).strip()
    if (code := _CODE.match(text)) is not None:
        text = code[2].strip()
    if (number := _ERRNO.match(text)) is not None:
        value = int(number[1])
        if value in _BY_ERRNO:
            return _BY_ERRNO[value]
        if value < 0:  # getaddrinfo's (EAI_*): the name did not resolve
            return _NAME_LOOKUP
        return os.strerror(value).lower() if value > 0 else text[number.end() :].strip() or "the connection failed"
    return LIBRARY_TEXTS.get(text.lower(), text)


def inside_job() -> bool:
    """Whether this process runs inside a job (the runner set `$MAM_JOB_ID`): its stderr is the job's output."""
    return bool(os.environ.get("MAM_JOB_ID"))


def seconds(value: float) -> str:
    """A duration as a person reads it in a log line: 0.4s, 12s, 3m05s."""
    if value < 10:
        return f"{value:.1f}s"
    if value < 60:
        return f"{value:.0f}s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m{rest:02d}s"


class Outage:
    """One connection's outages, said once each: `lost` gives the line that begins one (None while one
    goes on: each failed attempt after the first), `back` the line that ends it (None if none began)."""

    def __init__(self) -> None:
        self.since: float | None = None
        """When the current outage began (`time.monotonic()`); None while connected."""
        self.count = 0
        """How many outages began (an outage counts once, however many attempts it took)."""

    @property
    def down(self) -> bool:
        return self.since is not None

    def lost(self, url: str, exc: BaseException, then: str) -> str | None:
        """`lost the broker at URL: WHY; THEN` if this begins an outage, else None."""
        if self.since is not None:
            return None
        self.since = time.monotonic()
        self.count += 1
        return f"lost the broker at {url}: {why(exc)}; {then}"

    def back(self, url: str, then: str = "") -> str | None:
        """`reconnected to URL after 12s[; THEN]` if an outage ends now, else None."""
        if self.since is None:
            return None
        away, self.since = time.monotonic() - self.since, None
        return f"reconnected to {url} after {seconds(away)}" + (f"; {then}" if then else "")

    @staticmethod
    def retrying(url: str, exc: BaseException, delay: float) -> str:
        """The debug line for an attempt that failed during an outage."""
        return f"still no broker at {url}: {why(exc)}; trying again in {seconds(delay)}"


__all__ = ["LIBRARY_TEXTS", "Outage", "inside_job", "seconds", "why"]
