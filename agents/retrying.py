"""Retrying a finished job as a new one, for the cases no retry policy covered (`mam retry`, the
dashboard's Retry button, the MCP tool `retry_job`): `resubmission` is the new job's `submitted`,
`retry_one` checks the old job has finished, publishes it and awaits the projector's verdict."""

from __future__ import annotations

import anyio

from mam.agents.publisher import Publisher
from mam.contract import events as ev
from mam.contract import job_limits, job_options
from mam.contract.errors import Refused
from mam.contract.event_parts import GitInfo
from mam.contract.record import JobRecord
from mam.git.provenance import submit_git


def resubmission(record: JobRecord, git: GitInfo | None) -> ev.Submitted:
    """The new job `mam retry` submits: the same prompt, agent, session, role, labels, timeout, parent, every
    option it was given that a retry carries over (`mam.contract.job_options`: all but `after`, whose jobs have
    ended) and the session it resumed (`mam.contract.job_limits`), with `retry_of` naming the job it retries."""
    return ev.Submitted(
        prompt=record.prompt,
        agent=record.agent,
        agent_session=record.agent_session,
        role=record.role,
        labels=record.labels,
        timeout=record.timeout,
        parent=record.parent,
        git=git,
        retry_of=record.job_id,
        **(job_options.given(record, retry=True) | job_limits.of_record(record)),
    )


async def retry_one(
    pub: Publisher, old_id: str, new_id: str, *, timeout: float, cancel_first: str
) -> tuple[JobRecord, JobRecord]:
    """Retry one job as `mam retry` does: its retained state must be known and finished, then its
    `resubmission` as `new_id` is published and the projector's verdict awaited. Returns (old, new).
    `cancel_first`: how the caller's face cancels a job, named in the refusal of an unfinished one."""
    old = await pub.state(old_id)
    if old is None:
        raise Refused(f"no job {old_id!r} is known in workspace {pub.workspace.id}: check the id with `mam jobs`")
    if not old.status.terminal:
        raise Refused(
            f"job {old_id} is {old.status.value}; only a finished job can be retried "
            f"({cancel_first} first to start it over)"
        )
    git = await anyio.to_thread.run_sync(submit_git, pub.workspace.root, old.parent)
    return old, await pub.publish_and_wait(new_id, resubmission(old, git), timeout=timeout)


__all__ = ["resubmission", "retry_one"]
