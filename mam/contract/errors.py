"""Errors every part shares, each with the exit code a shell can branch on.

Exit codes follow the mosquitto clients and kubectl: 0 ok, 1 a failed job or a
refused event, 2 usage, 3 the broker or the projector cannot be reached.
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class MamError(Exception):
    """An expected failure: printed as one line, never as a traceback."""

    exit_code: int = EXIT_FAILED


class UsageError(MamError):
    """Bad arguments or configuration that the caller can fix."""

    exit_code = EXIT_USAGE


class InvalidId(UsageError):
    """A workspace or job id that is not allowed (hostile or malformed)."""


class BrokerUnreachable(MamError):
    """The broker refused or did not answer the connection."""

    exit_code = EXIT_UNREACHABLE


class NoProjector(MamError):
    """No projector announces itself online for the workspace."""

    exit_code = EXIT_UNREACHABLE


class Refused(MamError):
    """The projector refused an event; the message carries its reason."""

    exit_code = EXIT_FAILED


class WorkspaceLocked(MamError):
    """Another projector already serves this workspace."""

    exit_code = EXIT_FAILED


class LibraryChanged(MamError):
    """A library whose internals mam reaches into (amqtt, aiomqtt and paho-mqtt, uvicorn: the
    `*_internals` adapters, docs/contributing.md, Dependencies) lacks one of them: an unreviewed release.
    Raised at start-up, naming the release and the attribute, rather than running half-patched."""

    @classmethod
    def of(cls, distribution: str, lacking: str) -> LibraryChanged:
        from importlib.metadata import PackageNotFoundError, version  # 20-40 ms, and only this error needs it

        try:
            release = version(distribution)
        except PackageNotFoundError:
            release = "(version unknown)"
        return cls(
            f"{distribution} {release} {lacking}: mam runs on the releases in constraints.txt "
            "(pip install -c constraints.txt -e .)"
        )


def first_of(group: BaseExceptionGroup[E]) -> E:
    """The first exception `group` holds, however deep `except*` kept it (a task group's inside another's)."""
    found: E | BaseExceptionGroup[E] = group
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found
