"""The dashboard's writes beyond answer and landing: submit, retry, and cancel with a reason or a whole tree.

Each is what its command does (`mam submit`, `mam retry`, `mam cancel --tree`),
through the `Publisher`, with the projector's verdict as the reply: 201 and the
new job's status for a submit or a retry, 409 with the projector's reason when
it refuses. Bodies are JSON only (`application/json`: a cross-site form cannot
send one; the CSRF defence) and at most `limits.MAX_BODY` bytes; a field of the
wrong type or an unknown field is refused naming it, before anything is published.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final, TypeVar

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mam.agents.cancel_tree import cancel_tree
from mam.agents.publisher import Publisher, new_job_id
from mam.agents.retrying import retry_one
from mam.contract import events as ev
from mam.contract import job_spec
from mam.contract.broker_list import Brokers
from mam.contract.errors import EXIT_UNREACHABLE, EXIT_USAGE, MamError, Refused, UsageError
from mam.contract.ids import validate_job_id
from mam.contract.value_words import Field, checked_event, decode_body, msgspec_refusal
from mam.process.args import agent_name
from mam.registry.query import NoSuchJob, check_write_id
from mam.registry.reading import NotFound, read_record
from mam.web.hub import Hub

VERDICT_WAIT = 30.0
"""How long a write waits for the projector's verdict (`mam submit --timeout`'s default)."""

Resolve = Callable[[str, Hub], str]
T = TypeVar("T")


SubmitBody = job_spec.JobSpec
"""`POST /api/jobs`: the job spec (`mam.contract.job_spec`), `mam submit`'s and MCP `submit_job`'s options."""


_FIELDS: Final = {
    "reason": Field("why, recorded with the request"),
    "tree": Field("true: cancel the job and every unfinished job under it"),
    "job_id": Field("the new job's id (default: generated)"),
}
"""The cancel and retry bodies' fields, as a refusal names them."""


class CancelBody(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    reason: str | None = None
    tree: bool = False


class RetryBody(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    job_id: str | None = None
    """The new job's id (default: generated)."""


def http_status(exc: MamError) -> int:
    """The documented code for a failure (docs/api.md, Errors): 404 for no such job, 409 for a refusal."""
    if isinstance(exc, NotFound | NoSuchJob):
        return 404
    if isinstance(exc, Refused):
        return 409
    return {EXIT_USAGE: 400, EXIT_UNREACHABLE: 503}.get(exc.exit_code, 500)


async def body_of(request: Request, kind: type[T]) -> T:
    """The JSON body as `kind`; `UsageError` naming the field, or the content type, when it is not."""
    _json_only(request)
    given = decode_body(await request.body() or b"{}")
    if not isinstance(given, dict):
        raise UsageError(f"bad request: the body is a JSON {type(given).__name__}, not an object of fields")
    try:
        return msgspec.convert(given, type=kind)
    except msgspec.ValidationError as exc:
        raise UsageError(msgspec_refusal(exc, given, kind, "api", _FIELDS)) from None


async def known(hub: Hub, job_id: str) -> str:
    """`job_id` if the registry has its record; `NotFound` (404) before anything is published if not."""
    if job_id not in hub.jobs:
        await anyio.to_thread.run_sync(read_record, hub.workspace, job_id)
    return job_id


class _NotJson(Exception):
    pass


def _json_only(request: Request) -> None:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise _NotJson


def checked(event: ev.AnyEvent) -> ev.AnyEvent:
    """Validated with the projector's own schema, naming the field in mam's words (`reason: "..." is too long:
    ...`)."""
    return checked_event(event, "api", job_spec.fields())


def action_routes(hub: Hub, broker: Brokers, resolve: Resolve) -> dict[str, Callable[[Request], Any]]:
    """The handlers: `submit`, `retry`, `cancel`."""

    def written(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except _NotJson:
                return JSONResponse({"error": "send the request as application/json"}, 415)
            except MamError as exc:
                return JSONResponse({"error": str(exc)}, http_status(exc))

        return run

    def write_id(text: str, verb: str) -> str:
        found = resolve(validate_job_id(text), hub)
        check_write_id(text, found, verb)
        return found

    async def submit(request: Request) -> Response:
        _json_only(request)
        spec = job_spec.decode(await request.body() or b"{}")
        if not spec.prompt.strip():
            raise UsageError("prompt: the prompt is empty")
        try:
            agent_name(spec.agent)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"agent: {exc}") from None
        after = [resolve(job, hub) for job in spec.after] if spec.after else None
        parent = resolve(spec.parent, hub) if spec.parent else None
        resume = resolve(spec.resume, hub) if spec.resume else None
        spec = msgspec.structs.replace(spec, after=after, parent=parent, resume=resume, no_parent=parent is None)
        job_spec.submitted(spec, parent=parent, git=None)  # the checks across options, before anything is sent
        async with Publisher(hub.workspace, broker, by="mam-dashboard") as pub:
            record = await pub.submit(spec, wait=True, wait_timeout=VERDICT_WAIT)
        return JSONResponse({"job_id": record.job_id, "status": record.status.value}, 201)

    async def retry(request: Request) -> Response:
        body = await body_of(request, RetryBody)
        old_id = await known(hub, write_id(request.path_params["job_id"], "retry"))
        new_id = validate_job_id(body.job_id) if body.job_id else new_job_id()
        async with Publisher(hub.workspace, broker, by="mam-dashboard") as pub:
            _, record = await retry_one(pub, old_id, new_id, timeout=VERDICT_WAIT, cancel_first="cancel it")
        return JSONResponse({"job_id": record.job_id, "status": record.status.value, "retry_of": old_id}, 201)

    async def cancel(request: Request) -> Response:
        """`mam cancel` (exact id, as before) with an optional `reason`; `tree`: `mam cancel --tree`."""
        body = await body_of(request, CancelBody)
        job_id = await known(hub, validate_job_id(request.path_params["job_id"]))
        event = checked(ev.CancelRequested(reason=body.reason, tree=True if body.tree else msgspec.UNSET))
        assert isinstance(event, ev.CancelRequested)
        async with Publisher(hub.workspace, broker, by="mam-dashboard") as pub:
            if not body.tree:
                record = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
                return JSONResponse({"job_id": record.job_id, "status": record.status.value})
            records = await cancel_tree(pub, job_id, event, timeout=VERDICT_WAIT, wait=False)
        return JSONResponse(
            {
                "job_id": records[0].job_id,
                "status": records[0].status.value,
                "tree": [
                    {
                        "job_id": r.job_id,
                        "status": r.status.value,
                        "cancel_requested": r.cancel_requested_at is not None,
                    }
                    for r in records
                ],
            }
        )

    return {"submit": written(submit), "retry": written(retry), "cancel": written(cancel)}


__all__ = ["CancelBody", "RetryBody", "SubmitBody", "action_routes", "body_of", "http_status", "known"]
