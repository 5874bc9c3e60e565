"""`submit_job` and `cancel_job`: `mam submit` and `mam cancel` as tools, on the same confirmed-write path.

Each publishes only once a projector serves the workspace, then returns the
projector's verdict: the recorded state, or its refusal as a tool error.
"""

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field, PlainValidator, WithJsonSchema

from mam.agents.publisher import Publisher, new_job_id
from mam.agents.runner_hint import MCP, no_runner
from mam.client.live import agent_statuses
from mam.contract import events as ev
from mam.contract import job_spec, presence, routing
from mam.contract.errors import MamError, UsageError
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.contract.value_words import checked_event
from mam.git.provenance import submit_git
from mam.mcp_server.brief import brief_record, full_hint
from mam.mcp_server.limits import resumed
from mam.mcp_server.results import CancelResult, SubmitResult
from mam.mcp_server.served import JobRef, Served, as_dict, reported
from mam.process.args import agent_name

VERDICT_WAIT = 30.0
"""How long a write waits for the projector's verdict (`mam submit --timeout`'s default)."""

Wait = Annotated[
    bool,
    Field(
        description="return once the projector has recorded the job (or refused it); false: once the broker "
        "has the event"
    ),
]
Reason = Annotated[str | None, Field(description="why, recorded with the request")]


def checked(event: ev.AnyEvent) -> ev.AnyEvent:
    """Validate with the projector's own schema before publishing, naming the argument in mam's words
    (`role: "rrr..." is too long: 300 characters, at most 256 (...)`)."""
    return checked_event(event, "mcp", job_spec.fields())


def waiting(record: JobRecord, runners: list[AgentStatus], root: Path, waiter: str | None = None) -> str:
    """What a queued job waits for; for an agent no runner serves, what to start (`mam submit`'s hint); when its
    parent or the job submitting it (`waiter`) holds every slot it could take, that it cannot start."""
    if not presence.serving(runners, record.agent):
        return f"queued: {no_runner(record.agent, record.job_id, root, runners, MCP)}"
    return presence.waiting_reason(
        record.agent, runners, routing.required(record), record.job_id, record.parent, waiter
    )


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


def _checked_value(name: str) -> Callable[[Any], Any]:
    """The job spec's check of one argument, its refusal in mam's words (`arguments.argument_errors` keeps them)."""

    def check(value: Any) -> Any:
        try:
            return job_spec.check_value(name, value, "mcp")
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    return check


def _parameter(name: str) -> inspect.Parameter:
    """One `submit_job` argument from the job spec: its schema (bounds, help) and msgspec's check of a value."""
    kind = Annotated[Any, PlainValidator(_checked_value(name)), WithJsonSchema(job_spec.option_schema(name))]
    default = inspect.Parameter.empty if name in job_spec.REQUIRED else None
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)


SUBMIT_SIGNATURE = inspect.Signature(
    [
        *(_parameter(name) for name in job_spec.names("mcp")),
        inspect.Parameter("wait", inspect.Parameter.KEYWORD_ONLY, default=True, annotation=Wait),
    ],
    return_annotation=SubmitResult,
)
"""`submit_job`'s arguments: the job spec's options for MCP (`mam.contract.job_spec`), and `wait`."""


def register(app: MCPServer, served: Served) -> None:
    async def submit_job(**arguments: Any) -> SubmitResult:
        """Delegate a job to an agent: submit it to the workspace's registry, where a runner for that agent
        claims and runs it (list_agents names the agents with runners). Returns the job's id and, with wait
        (the default), its recorded state in brief. Follow it with wait_job (its result) or job_output (its
        output so far)."""
        wait = bool(arguments.pop("wait", True))
        spec = job_spec.convert(arguments, front="mcp")
        if not spec.prompt.strip():
            raise UsageError("prompt: the prompt is empty")
        _agent(spec.agent)
        chosen_parent = spec.parent or (None if spec.no_parent else served.parent)
        event = checked(job_spec.submitted(spec, parent=chosen_parent, git=None))  # every bound before any lookup
        dependencies = [await served.job_id(job) for job in spec.after] if spec.after else None
        git = await anyio.to_thread.run_sync(submit_git, served.workspace.root, chosen_parent)
        event = msgspec.structs.replace(event, git=git, **({"after": dependencies} if dependencies else {}))
        job_id = spec.job_id or new_job_id()
        async with served.publisher() as pub:
            event = msgspec.structs.replace(event, **await resumed(pub, served, spec.resume, spec.agent))
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
        result = SubmitResult(
            job_id=job_id,
            event_id=record.last_event_id or "",
            recorded=True,
            status=record.status.value,
            job=brief_record(as_dict(record), full_hint(job_id)),
        )
        if record.parent:
            result["parent"] = record.parent
        if runners is not None and record.status is Status.SUBMITTED:
            result["waiting"] = waiting(record, runners, served.workspace.root, served.parent)
        return result

    submit_job.__signature__ = SUBMIT_SIGNATURE  # type: ignore[attr-defined]
    app.tool()(reported(submit_job))

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
        return CancelResult(
            job_id=record.job_id,
            status=record.status.value,
            job=brief_record(as_dict(record), full_hint(record.job_id)),
        )


__all__ = ["SUBMIT_SIGNATURE", "VERDICT_WAIT", "checked", "register", "waiting"]
