"""`get_job` and `list_jobs`: `mam show` and `mam jobs` as tools, through the same query and reading code."""

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.contract.arg_limits import MOST_LABELS, MOST_STATUSES, at_most
from mam.contract.errors import UsageError
from mam.contract.humanize import parse_since
from mam.contract.record import Status
from mam.contract.timefmt import utc_now
from mam.mcp_server.brief import brief_record, full_hint
from mam.mcp_server.results import JobList, summary
from mam.mcp_server.served import Full, JobRef, Served, as_dict, reported
from mam.registry.listing import Jobs
from mam.registry.query import JobFilter, NoSuchJob, parse_statuses, resolve_job_id
from mam.registry.reading import job_ids

DEFAULT_LIMIT = 20

Statuses = Annotated[
    list[str] | None,
    Field(
        description="only jobs with one of these statuses",
        json_schema_extra={"items": {"enum": [s.value for s in Status]}, "maxItems": MOST_STATUSES},
    ),
]
AgentName = Annotated[str | None, Field(description="only jobs for this agent")]
Labels = Annotated[
    dict[str, str] | None,
    Field(description="only jobs with all of these labels", json_schema_extra={"maxProperties": MOST_LABELS}),
]
ParentRef = Annotated[str | None, Field(description="only jobs delegated by this job (any unique prefix or suffix)")]
Since = Annotated[str | None, Field(description="only jobs submitted since then: 30m, 2h, 1d, or an ISO time")]
Limit = Annotated[int, Field(ge=1, le=1000, description="at most this many jobs, newest first")]


def _filter(
    statuses: list[str] | None,
    agent: str | None,
    labels: dict[str, str] | None,
    parent: str | None,
    since: str | None,
    known: list[str],
) -> JobFilter:
    """The filter `mam jobs` builds from the same values (see `mam.cli.jobs.job_filter`)."""
    try:
        chosen = parse_statuses(statuses or [])
    except ValueError as exc:
        raise UsageError(f"status: {exc}") from None
    when = None
    if since:
        try:
            when = parse_since(since, utc_now())
        except ValueError as exc:
            raise UsageError(f"since: {exc}") from None
    if parent:
        try:
            parent = resolve_job_id(parent, known)
        except NoSuchJob:
            pass  # no such job: it has no children either
    return JobFilter(statuses=chosen, agent=agent, labels=dict(labels or {}), parent=parent, since=when)


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def get_job(job: JobRef, full: Full = False) -> dict[str, Any]:
        """One job's record: status, agent, prompt, parent, times, exit code, result, error, usage and the rest
        (the keys of `mam show --json`). In brief unless full: no null or empty fields, no bookkeeping keys,
        prompt, result and error cut to 500 characters (`cut` names what was cut)."""
        record = as_dict(await served.record(await served.job_id(job)))
        return record if full else brief_record(record, full_hint(record["job_id"]))

    @app.tool()
    @reported
    async def list_jobs(
        status: Statuses = None,
        agent: AgentName = None,
        labels: Labels = None,
        parent: ParentRef = None,
        since: Since = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> JobList:
        """The workspace's jobs, newest first, each in brief (get_job has the whole record); every filter
        given must match."""
        at_most("status", status, MOST_STATUSES, "statuses")  # limits before any lookup
        at_most("labels", labels, MOST_LABELS, "labels")

        def read() -> JobList:
            where = _filter(status, agent, labels, parent, since, job_ids(served.workspace) if parent else [])
            with Jobs(served.workspace) as jobs:  # through the query index when it is current
                shown, total = jobs.select(where, limit)
                return JobList(jobs=[summary(r, as_dict(r)) for r in shown], total=total)

        return await anyio.to_thread.run_sync(read)


__all__ = ["register"]
