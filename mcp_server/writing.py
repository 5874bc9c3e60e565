"""`submit_job` and `cancel_job`: `mam submit` and `mam cancel` as tools, on the same confirmed-write path.

Each publishes only once a projector serves the workspace, then returns the
projector's verdict: the recorded state, or its refusal as a tool error.
"""

import argparse
import re
from typing import Annotated

import anyio
import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.agents.publisher import Publisher, new_job_id
from mam.cli.args import agent_name
from mam.client.live import agent_statuses
from mam.contract import events as ev
from mam.contract import presence, routing
from mam.contract.arg_limits import MOST_AFTER, MOST_LABELS, at_most
from mam.contract.errors import MamError, UsageError
from mam.contract.ids import AGENT_ID_PATTERN, JOB_ID_PATTERN
from mam.contract.record import Status
from mam.contract.status import AgentStatus
from mam.git.provenance import git_info
from mam.mcp_server.brief import brief_record, full_hint
from mam.mcp_server.limits import (
    BudgetTokens,
    BudgetUsd,
    MaxTurns,
    Model,
    Resume,
    TreeBudgetTokens,
    TreeBudgetUsd,
    limit_fields,
    resumed,
)
from mam.mcp_server.results import CancelResult, SubmitResult
from mam.mcp_server.served import JobRef, Served, as_dict, reported

VERDICT_WAIT = 30.0
"""How long a write waits for the projector's verdict (`mam submit --timeout`'s default)."""

Prompt = Annotated[str, Field(description="what the job should do; the agent gets it on stdin")]
Agent = Annotated[
    str,
    Field(description="the agent that should run it (a runner `mam-agent --agent NAME` claims it), e.g. claude-code",
          json_schema_extra={"pattern": AGENT_ID_PATTERN}),
]
Role = Annotated[str | None, Field(description="the role the agent plays in it, e.g. reviewer")]
Labels = Annotated[
    dict[str, str] | None,
    Field(description="labels to find it by later, e.g. {\"ticket\": \"12\"}",
          json_schema_extra={"maxProperties": MOST_LABELS}),
]
Parent = Annotated[
    str | None,
    Field(description="the job that delegates this one (default: the job this server runs inside, $MAM_JOB_ID)",
          json_schema_extra={"pattern": JOB_ID_PATTERN}),
]
JobTimeout = Annotated[
    float | None,
    Field(gt=0, description="seconds the job may run before its runner stops it (its run limit: `mam submit "
          "--job-timeout`, the Python API's job_timeout); time spent waiting for a person does not count"),
]
OldTimeout = Annotated[
    float | None,
    Field(gt=0, description="deprecated: the old name of job_timeout (the job's run limit, not a wait); give "
          "job_timeout instead", json_schema_extra={"deprecated": True}),
]
Retries = Annotated[
    int | None, Field(ge=0, le=ev.MAX_RETRIES, description="retry policy: at most this many further attempts")
]
RetryOn = Annotated[
    list[ev.RetryOutcome] | None,
    Field(description="the outcomes that retry (default: failed and lost)"),
]
Require = Annotated[
    dict[str, str] | None,
    Field(description="runner labels the job needs, e.g. {\"gpu\": \"a100\"}: only a runner started with "
          "`mam-agent --label gpu=a100` gets it"),
]
Priority = Annotated[
    int | None,
    Field(ge=ev.MIN_PRIORITY, le=ev.MAX_PRIORITY,
          description="higher runs first (default 0); equal priorities take turns across delegation trees"),
]
Permissions = Annotated[
    ev.PermissionLevel | None,
    Field(description="what the job's agent may do: read-only, edit (files in its directory) or full; default "
          "its runner's level, which is also the most it may ask (asking more fails the job)"),
]
Backoff = Annotated[
    float | None,
    Field(ge=0, description="seconds before the first retry, doubling each time, with jitter (default 1)"),
]
After = Annotated[
    list[str] | None,
    Field(description="jobs (ids, or unique prefixes or suffixes) that must all succeed before this one may run; "
          "it is blocked until then, and cancelled if one of them ends otherwise",
          json_schema_extra={"maxItems": MOST_AFTER}),
]
Wait = Annotated[
    bool,
    Field(description="return once the projector has recorded the job (or refused it); false: once the broker "
          "has the event"),
]
Reason = Annotated[str | None, Field(description="why, recorded with the request")]


def checked(event: ev.AnyEvent) -> ev.AnyEvent:
    """Validate with the projector's own schema before publishing, naming the argument
    (`role: Expected str of length <= 256`)."""
    try:
        return ev.decode_event(ev.encode_event(event))
    except ev.EventError as exc:
        message = str(exc).removeprefix("invalid event: ")
        field = re.search(r"`\$\.([A-Za-z_]+)", message)
        if field is None:
            raise UsageError(message) from None
        reason = message.split(" - at ")[0] + (" (in a key)" if " - at `key` in " in message else "")
        raise UsageError(f"{field.group(1)}: {reason}") from None


def run_limit(job_timeout: float | None, timeout: float | None) -> float | None:
    """The job's run limit from `job_timeout` or its deprecated alias `timeout` (MCP's name for it before
    the CLI's `--job-timeout` became the one name); both given must agree."""
    if timeout is not None and job_timeout is not None and timeout != job_timeout:
        raise UsageError(f"timeout: {timeout:g} is the old name of job_timeout, which is {job_timeout:g}: "
                         "give job_timeout only")
    return job_timeout if job_timeout is not None else timeout


def _agent(text: str) -> str:
    try:
        return agent_name(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"agent: {exc}") from None


async def _runners(pub: Publisher, served: Served) -> list[AgentStatus] | None:
    """The runners' retained statuses, read on a channel of their own; None if that failed."""
    try:
        async with served.connection.channel() as channel:
            return list((await agent_statuses(channel, pub.topics)).values())  # type: ignore[arg-type]
    except MamError:
        return None


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def submit_job(
        prompt: Prompt,
        agent: Agent,
        role: Role = None,
        labels: Labels = None,
        parent: Parent = None,
        job_timeout: JobTimeout = None,
        wait: Wait = True,
        retries: Retries = None,
        retry_on: RetryOn = None,
        backoff: Backoff = None,
        after: After = None,
        timeout: OldTimeout = None,
        permissions: Permissions = None,
        resume: Resume = None,
        model: Model = None,
        max_turns: MaxTurns = None,
        budget_tokens: BudgetTokens = None,
        budget_usd: BudgetUsd = None,
        tree_budget_tokens: TreeBudgetTokens = None,
        tree_budget_usd: TreeBudgetUsd = None,
        require: Require = None,
        priority: Priority = None,
    ) -> SubmitResult:
        """Delegate a job to an agent: submit it to the workspace's registry, where a runner for that agent
        claims and runs it (list_agents names the agents with runners). Returns the job's id and, with wait
        (the default), its recorded state in brief. Follow it with wait_job (its result) or job_output (its
        output so far)."""
        if not prompt.strip():
            raise UsageError("prompt: the prompt is empty")
        job_timeout = run_limit(job_timeout, timeout)
        chosen_parent = parent or served.parent
        at_most("after", after, MOST_AFTER, "jobs")  # limits before work: the schema check below
        at_most("labels", labels, MOST_LABELS, "labels")  # builds the whole event first
        policy = ev.submit_policy(retries=retries, retry_on=retry_on, backoff=backoff, after=after or None)
        event = checked(  # every count and size, with `after` as given, before any lookup
            ev.Submitted(
                prompt=prompt, agent=_agent(agent), role=role, labels=labels or {}, timeout=job_timeout,
                parent=chosen_parent, **policy, **({"permissions": permissions} if permissions else {}),
                **limit_fields(model=model, max_turns=max_turns, budget_tokens=budget_tokens, budget_usd=budget_usd,
                               tree_budget_tokens=tree_budget_tokens, tree_budget_usd=tree_budget_usd),
                **routing.submit_fields(require, priority),  # type: ignore[arg-type]
            )
        )
        dependencies = [await served.job_id(job) for job in after] if after else None
        git = await anyio.to_thread.run_sync(git_info, served.workspace.root)
        event = msgspec.structs.replace(event, git=git, **({"after": dependencies} if dependencies else {}))
        job_id = new_job_id()
        async with served.publisher() as pub:
            event = msgspec.structs.replace(event, **await resumed(pub, served, resume, event.agent))
            if not wait:
                sent = await pub.publish_served(job_id, event)
                unconfirmed = SubmitResult(job_id=job_id, event_id=sent.id or "", recorded=False)
                if chosen_parent:
                    unconfirmed["parent"] = chosen_parent
                return unconfirmed
            runners: list[AgentStatus] | None = None

            async def look() -> None:
                nonlocal runners
                runners = await _runners(pub, served)

            async with anyio.create_task_group() as tg:
                tg.start_soon(look)
                record = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
        result = SubmitResult(job_id=job_id, event_id=record.last_event_id or "", recorded=True,
                              status=record.status.value, job=brief_record(as_dict(record), full_hint(job_id)))
        if record.parent:
            result["parent"] = record.parent
        if runners is not None and record.status is Status.SUBMITTED:
            result["waiting"] = presence.waiting_reason(record.agent, runners, routing.required(record))
        return result

    @app.tool()
    @reported
    async def cancel_job(job: JobRef, reason: Reason = None) -> CancelResult:
        """Ask for a job to be cancelled. Returns once the projector has recorded the request: a job nobody
        claimed is cancelled at once, a running one once its runner has stopped it (wait_job tells when).
        A finished job cannot be cancelled."""
        event = checked(ev.CancelRequested(reason=reason))
        job_id = await served.job_id_for_write(job, "cancel")
        async with served.publisher() as pub:
            record = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
        return CancelResult(job_id=record.job_id, status=record.status.value,
                            job=brief_record(as_dict(record), full_hint(record.job_id)))


__all__ = ["VERDICT_WAIT", "checked", "register", "run_limit"]
