"""`GET /api/openapi.json`: the OpenAPI 3.1 description of every dashboard route, built from code.

The job record's schema comes from the record's own type (`msgspec.json.schema_components`),
so it cannot drift from what `GET /api/jobs/{id}` sends; the rest is written here, beside the
handlers' modules, and `tests/web/test_dashboard_api.py` validates every response it gets against it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from mam.contract.record import JobRecord, Status
from mam.contract.usage import BY
from mam.web.job_audit import DEFAULT_EVENTS, DEFAULT_OUTPUT, MOST_EVENTS, MOST_OUTPUT
from mam.web.job_list import DEFAULT_LIMIT, DEFAULT_SORT, MOST_LIMIT, SORT_KEYS
from mam.web.openapi_schemas import REF, SCHEMAS, STRING, ref
from mam.web.stats import MOST_BUCKETS, MOST_MINUTES


def _json(name: str, description: str = "") -> dict[str, Any]:
    return {"description": description or name, "content": {"application/json": {"schema": ref(name)}}}


ERRORS = {
    code: _json("Error", why)
    for code, why in (
        ("400", "bad input: the error names what was sent"),
        ("404", "no such job, or no audit log for it"),
        ("409", "the projector refused the event (its reason)"),
        ("413", "a request body over 64 KiB (a longer prompt: `mam submit`)"),
        ("415", "the body is not application/json"),
        ("503", "no projector or broker answered"),
    )
}


def _param(name: str, description: str, schema: dict[str, Any], where: str = "query", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "description": description,
        "schema": schema,
        "required": where == "path",
        **more,
    }


JOB_ID = _param(
    "job_id", "the job's id, or a unique prefix or suffix of it (writes: at least 4 characters)", STRING, "path"
)
REPEATED = {"type": "array", "items": STRING}


def _get(
    summary: str,
    response: str,
    params: list[dict[str, Any]],
    errors: tuple[str, ...] = ("400", "404"),
    media: str = "application/json",
) -> dict[str, Any]:
    ok = (
        _json(response, summary)
        if media == "application/json"
        else {"description": summary, "content": {media: {"schema": {"type": "string"}}}}
    )
    return {
        "get": {"summary": summary, "parameters": params, "responses": {"200": ok, **{c: ERRORS[c] for c in errors}}}
    }


def _post(
    summary: str,
    request: str,
    response: str,
    code: str = "200",
    path: bool = True,
    errors: tuple[str, ...] = ("400", "404", "409", "413", "415", "503"),
) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "parameters": [JOB_ID] if path else [],
            "requestBody": {"required": False, "content": {"application/json": {"schema": ref(request)}}},
            "responses": {code: _json(response, summary), **{c: ERRORS[c] for c in errors}},
        }
    }


def _paths() -> dict[str, Any]:
    jobs_params = [
        _param("status", "statuses, repeatable or comma-separated; any of them", REPEATED, style="form", explode=True),
        _param("agent", "agents, repeatable or comma-separated; any of them", REPEATED, explode=True),
        _param("label", "key=value, repeatable or comma-separated; all of them", REPEATED, explode=True),
        _param("parent", "only the jobs this job delegated (directly)", STRING),
        _param("root", "only this job and its whole delegation subtree", STRING),
        _param("q", "case-insensitive text in the prompt or in a label's key or value", STRING),
        _param("since", "submitted at or after: an ISO 8601 time or an age (15m, 2h, 7d)", STRING),
        _param("until", "submitted at or before: an ISO 8601 time or an age (15m, 2h, 7d)", STRING),
        _param(
            "sort",
            f"{', '.join(SORT_KEYS)}; a leading - for descending",
            {"type": "string", "default": DEFAULT_SORT, "enum": [*SORT_KEYS, *(f"-{k}" for k in SORT_KEYS)]},
        ),
        _param(
            "limit",
            "rows in the page",
            {"type": "integer", "minimum": 1, "maximum": MOST_LIMIT, "default": DEFAULT_LIMIT},
        ),
        _param("offset", "rows skipped before the page", {"type": "integer", "minimum": 0, "default": 0}),
    ]
    jobs = _get(
        "the jobs that match, one page, newest first by default, with how many match", "JobsPage", jobs_params, ("400",)
    )
    jobs.update(
        _post(
            "submit a job (mam submit); the projector's verdict",
            "SubmitRequest",
            "Verdict",
            "201",
            path=False,
            errors=("400", "409", "413", "415", "503"),
        )
    )
    return {
        "/api/jobs": jobs,
        "/api/jobs/{job_id}": _get("the job's whole record (mam show --json)", "JobDetail", [JOB_ID]),
        "/api/jobs/{job_id}/events": _get(
            "the job's audit log entries (mam events --json), a page",
            "EventsPage",
            [
                JOB_ID,
                _param("after_seq", "entries after this seq", {"type": "integer", "minimum": 0, "default": 0}),
                _param(
                    "limit",
                    "entries at most",
                    {"type": "integer", "minimum": 1, "maximum": MOST_EVENTS, "default": DEFAULT_EVENTS},
                ),
            ],
        ),
        "/api/jobs/{job_id}/output": _get(
            "the job's output (mam logs) by byte range, cut at whole characters",
            "OutputRange",
            [
                JOB_ID,
                _param("offset", "the first byte", {"type": "integer", "minimum": 0, "default": 0}),
                _param(
                    "limit",
                    "bytes at most",
                    {"type": "integer", "minimum": 1, "maximum": MOST_OUTPUT, "default": DEFAULT_OUTPUT},
                ),
            ],
        ),
        "/api/jobs/{job_id}/log": _get(
            "a page of the job's audit log ending at byte before (the detail view)",
            "LogPage",
            [JOB_ID, _param("before", "a byte offset: the page's end", {"type": "integer", "minimum": 0})],
        ),
        "/api/jobs/{job_id}/diff": _get(
            "a worktree job's diff against its base, size-capped", "Diff", [JOB_ID], ("400", "404", "409")
        ),
        "/api/jobs/{job_id}/cancel": _post(
            "cancel the job (mam cancel); tree: and every unfinished job under it", "CancelRequest", "CancelVerdict"
        ),
        "/api/jobs/{job_id}/retry": _post(
            "resubmit a finished job as a new one (mam retry)", "RetryRequest", "RetryVerdict", "201"
        ),
        "/api/jobs/{job_id}/answer": _post("answer a waiting job's question (mam answer)", "AnswerRequest", "Verdict"),
        "/api/jobs/{job_id}/merge": _post(
            "merge a worktree job's branch (mam merge)",
            "LandRequest",
            "Landed",
            errors=("400", "404", "409", "413", "415"),
        ),
        "/api/jobs/{job_id}/discard": _post(
            "discard a worktree job's branch (mam discard)",
            "LandRequest",
            "Landed",
            errors=("400", "404", "409", "413", "415"),
        ),
        "/api/agents": _get(
            "the runners from their retained statuses (mam agents)",
            "Runners",
            [_param("all", "also runners offline for over a day", {"type": "boolean", "default": False})],
            ("400",),
        ),
        "/api/usage": _get(
            "cost and tokens the agents reported, totalled (mam usage --json)",
            "UsageReport",
            [
                _param("since", "jobs submitted since: an ISO 8601 time or an age (15m, 2h, 7d)", STRING),
                _param("by", "one group per agent, session or delegation tree", {"enum": list(BY), "default": "agent"}),
            ],
            ("400",),
        ),
        "/api/stats": _get(
            "the charts' series: finished by outcome, queue depth, cost per agent",
            "Stats",
            [
                _param(
                    "minutes",
                    "the window, up to now",
                    {"type": "integer", "minimum": 1, "maximum": MOST_MINUTES, "default": 60},
                ),
                _param(
                    "bucket",
                    f"seconds per bucket (at most {MOST_BUCKETS} buckets)",
                    {"type": "integer", "minimum": 1, "default": 60},
                ),
            ],
            ("400",),
        ),
        "/api/stream": _get(
            "the page's live view as server-sent events: a snapshot, then changes",
            "Error",
            [
                _param("status", "comma-separated statuses", STRING),
                _param("agent", "an agent", STRING),
                _param("label", "comma-separated key=value", STRING),
                _param("job", "a job whose detail to follow", STRING),
            ],
            ("400",),
            media="text/event-stream",
        ),
        "/api/openapi.json": {
            "get": {
                "summary": "this description",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/metrics": _get("Prometheus metrics (text format)", "Error", [], (), media="text/plain"),
        "/favicon.ico": {
            "get": {
                "summary": "the dashboard's icon",
                "responses": {
                    "200": {
                        "description": "an icon",
                        "content": {"image/x-icon": {"schema": {"type": "string", "contentEncoding": "binary"}}},
                    }
                },
            }
        },
    }


@cache
def openapi() -> dict[str, Any]:
    """The document (built once)."""
    _, record = msgspec.json.schema_components([JobRecord], ref_template=REF)
    record["Status"] = {"enum": [s.value for s in Status], "type": "string"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mam dashboard API",
            "version": "1",
            "description": "The dashboard's JSON API (docs/api.md). Every route is behind the dashboard's "
            "login and host rules; writes take application/json only.",
        },
        "paths": _paths(),
        "components": {"schemas": {**record, **SCHEMAS}},
    }


__all__ = ["openapi"]
