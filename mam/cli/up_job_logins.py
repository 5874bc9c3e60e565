"""`mam up`'s side of jobs' own logins: the broker's `JobLogins` wired to the registry and the projector.

The broker asks the registry (the record files the projector in this process
writes) whether a job runs and where it lies in its tree; every state the
projector publishes goes past `JobLogins.saw_state`, which closes the
connections of a job that ended; a publish a job's login may not make is
answered on `rejected`, signed with the projector's key like any refusal, so
`mam submit` or `mam ask` inside the job says why at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import anyio.abc

from mam.broker.job_logins import JobLogins, Refusal
from mam.contract.record import JobRecord
from mam.contract.status import encode
from mam.contract.timefmt import utc_now_iso
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.projector.audit_log import Rejection
from mam.registry.reading import NotFound, read_record

log = logging.getLogger("mam.broker")

LocalPublish = Callable[[str, bytes, bool], Awaitable[None]]
MOST_QUEUED = 1000
"""Refusals waiting to be published; past this they are counted, not queued (a job that floods gets fewer)."""


def job_record(workspace: Workspace, job_id: str) -> JobRecord | None:
    """The job's record from the registry, None if it has none (a damaged or planted one raises)."""
    try:
        return read_record(workspace, job_id)
    except NotFound:
        return None


class UpJobLogins:
    """The job logins of `mam up`'s broker, and what publishes their refusals."""

    def __init__(self, workspace: Workspace) -> None:
        self.topics = Topics(workspace.id)
        self._send, self._receive = anyio.create_memory_object_stream[Refusal](MOST_QUEUED)
        self.jobs = JobLogins(workspace.id, partial(job_record, workspace), on_refused=self._queue)
        self.unpublished = 0
        """Refusals not published because too many were waiting."""

    def _queue(self, refusal: Refusal) -> None:
        try:
            self._send.send_nowait(refusal)
        except anyio.WouldBlock:
            self.unpublished += 1

    def watching(self, publish: LocalPublish) -> LocalPublish:
        """`publish` (the projector's way into the broker), telling the job logins of each state after it."""
        jobs = self.jobs

        async def publish_and_look(topic: str, payload: bytes, retain: bool) -> None:
            await publish(topic, payload, retain)
            jobs.saw_state(topic)

        return publish_and_look

    async def publish_refusals(
        self,
        publish: LocalPublish,
        sign: Callable[[bytes], bytes],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Publish each refusal on `rejected`, signed (`sign`: the projector's), until cancelled."""
        task_status.started()
        async with self._receive:
            async for refusal in self._receive:
                rejection = Rejection(
                    received_at=utc_now_iso(),
                    topic=refusal.topic,
                    reason=refusal.reason,
                    job_id=refusal.job_id,
                    event_id=refusal.event_id,
                )
                try:
                    await publish(self.topics.rejected, sign(encode(rejection)), False)
                except Exception as exc:  # noqa: BLE001 - a refusal not said is no reason to stop the broker
                    log.warning(
                        "cannot publish the refusal of %s's publish on %s: %s", refusal.login, refusal.topic, exc
                    )


__all__ = ["UpJobLogins", "job_record"]
