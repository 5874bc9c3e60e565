"""What every tool shares: the workspace served, its one broker connection, and how a failure is reported."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio
import msgspec
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mam.agents.publisher import Publisher
from mam.client.reconnecting import Reconnecting
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError
from mam.contract.ids import validate_job_id
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.mcp_server.connection import Channel, SharedConnection
from mam.registry.query import check_write_id
from mam.registry.reading import read_record, resolve_id

P = ParamSpec("P")
R = TypeVar("R")

BY = "mam-mcp"
"""The `by` of every event this server publishes."""

JobRef = Annotated[str, Field(description="the job's id, or any unique prefix or suffix of it")]
"""A tool's job argument: resolved against the registry like `mam show`'s (`Served.job_id`)."""
Full = Annotated[
    bool,
    Field(
        description="the whole record, every key as the registry holds it; default: in brief (no null fields, "
        "long texts cut, see `cut`)"
    ),
]


class ChannelPublisher(Publisher):
    """The Publisher (confirmed writes, waits) on a channel of the shared connection, not a connection of its own."""

    def __init__(
        self, workspace: Workspace, broker: Brokers, channel: Channel | None, connection: SharedConnection | None = None
    ) -> None:
        super().__init__(workspace, broker, by=BY)
        self._channel = channel
        self._connection = connection
        self.can_reconnect = False  # the shared connection reconnects; a lost verdict wait fails as before
        self.say_to = None  # the server's log says when the shared connection is lost (connection.py)

    @property
    def client(self) -> Any:  # a Channel stands in for the aiomqtt client
        return self._channel

    def reconnecting(self) -> Reconnecting:
        """As the Publisher's, on channels: a wait begun while the shared connection is down (a restart)
        waits for it, unless it never connected (then the "cannot reach" error)."""
        link = super().reconnecting()
        link.connected_before = self._connection is None or self._connection.ever_connected
        return link

    @asynccontextmanager
    async def _renewed(self) -> AsyncIterator[Any]:
        """A wait that rides out a restart (`wait_job`, `ask_person`) goes on in a new channel of the
        shared connection, once that is back (`BrokerUnreachable` until then: tried again)."""
        if self._connection is None:
            raise MamError("this publisher's channel cannot be replaced")
        async with self._connection.channel() as channel:
            self._channel = channel
            yield channel


@dataclass(frozen=True)
class Served:
    """The workspace this server serves, resolved once at start like any command's."""

    workspace: Workspace
    broker: Brokers
    connection: SharedConnection
    parent: str | None = None
    """The job this server runs inside (`MAM_JOB_ID`, set by the runner): the default parent of a submit."""

    @classmethod
    def start(cls, workspace: Workspace, broker: Brokers) -> Served:
        inside = os.environ.get("MAM_JOB_ID") or None
        return cls(workspace, broker, SharedConnection(broker), validate_job_id(inside) if inside else None)

    @asynccontextmanager
    async def publisher(self) -> AsyncIterator[Publisher]:
        """A publisher for one tool call, on its own channel of the shared connection."""
        async with self.connection.channel() as channel:
            yield ChannelPublisher(self.workspace, self.broker, channel, self.connection)

    async def wait_ended(self, job_id: str, timeout: float) -> JobRecord:
        """`Publisher.wait_ended` on channels of the shared connection, each opened by its reconnecting
        wait (the first too: a wait asked for during a restart waits for the connection to come back)."""
        return await ChannelPublisher(self.workspace, self.broker, None, self.connection).wait_ended(
            job_id, timeout=timeout
        )

    async def job_id(self, text: str) -> str:
        """The registry's one id that is `text` or starts or ends with it; `text` if none is (as `mam show`)."""
        return await anyio.to_thread.run_sync(resolve_id, self.workspace, text)

    async def job_id_for_write(self, text: str, verb: str) -> str:
        """`job_id`, but a prefix or suffix shorter than `MIN_WRITE_CHARS` is refused, as `mam cancel`'s."""
        found = await self.job_id(text)
        check_write_id(text, found, verb)
        return found

    async def record(self, job_id: str) -> JobRecord:
        return await anyio.to_thread.run_sync(read_record, self.workspace, job_id)


def as_dict(record: JobRecord) -> dict[str, Any]:
    """A record as its JSON object: the registry file's keys (`mam show --json`)."""
    value: dict[str, Any] = msgspec.to_builtins(record)
    return value


def reported(tool: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn mam's expected failures into a tool error carrying the CLI's one-line reason."""

    @functools.wraps(tool)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await tool(*args, **kwargs)
        except MamError as exc:
            raise ToolError(str(exc)) from None
        except BaseExceptionGroup as group:  # a task group's: a reason only if that is all it holds
            expected = _only_mam_errors(group)
            if expected is None:
                raise
            raise ToolError(str(expected)) from None

    return call


def _only_mam_errors(group: BaseExceptionGroup) -> MamError | None:
    matched, rest = group.split(MamError)
    if matched is None or rest is not None:
        return None
    leaf: BaseException = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, MamError) else None


__all__ = ["BY", "ChannelPublisher", "Full", "JobRef", "Served", "as_dict", "reported"]
