"""The OpenAPI document's components (`web/openapi.py`): the shapes the dashboard's routes send and take, beside
the job record's, which `openapi()` takes from the record's own type. Written here, beside the handlers' modules;
`tests/web/test_dashboard_api.py` validates every response it gets against them.
"""

from __future__ import annotations

from typing import Any

from mam.contract import job_spec
from mam.contract.usage import BY
from mam.web.stats import OUTCOMES

REF = "#/components/schemas/{name}"


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def nullable(kind: str | dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [{"type": kind} if isinstance(kind, str) else kind, {"type": "null"}]}


def json_object(properties: dict[str, Any], required: list[str] | None = None, *, more: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }
    if not more:
        schema["additionalProperties"] = False
    return schema


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}
BOOLEAN = {"type": "boolean"}
TIME = {"type": "string", "format": "date-time"}
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}

WAITS = (
    "why a submitted or blocked job waits, as `mam logs -f` says it (no runner for its agent, none with the "
    "labels it requires, every slot taken, the jobs it runs --after, the queued jobs ahead of it); null else"
)
JOB_ROW = json_object(
    {
        "job_id": STRING,
        "status": ref("Status"),
        "agent": STRING,
        "prompt": {"type": "string", "description": "at most 200 characters of the prompt"},
        "prompt_truncated": BOOLEAN,
        "labels": LABELS,
        "parent": nullable("string"),
        "root": {"type": "string", "description": "the job at the top of its delegation tree (itself for a root)"},
        "runner": nullable("string"),
        "attempt": INTEGER,
        "exit_code": nullable("integer"),
        "error": nullable({"type": "string", "maxLength": 200}),
        "submitted_at": TIME,
        "started_at": nullable(TIME),
        "finished_at": nullable(TIME),
        "duration_s": nullable("number"),
        "cost_usd": nullable("number"),
        "question": nullable("string"),
        "denials": {
            "type": "array",
            "items": STRING,
            "description": "the tool calls its agent was refused at its permission level, one line each",
        },
        "waits": nullable({"type": "string", "description": WAITS}),
    },
    more=False,
)

TOTALS = json_object(
    {
        "jobs": INTEGER,
        "jobs_reporting_usage": INTEGER,
        "cost_usd": nullable("number"),
        "input_tokens": nullable("integer"),
        "cached_input_tokens": nullable("integer"),
        "output_tokens": nullable("integer"),
        "turns": nullable("integer"),
    }
)

SCHEMAS: dict[str, Any] = {
    "Error": json_object({"error": {"type": "string", "description": "one line naming what was sent"}}),
    "JobRow": JOB_ROW,
    "JobsPage": json_object(
        {"total": INTEGER, "offset": INTEGER, "limit": INTEGER, "jobs": {"type": "array", "items": ref("JobRow")}},
        more=False,
    ),
    "JobDetail": json_object(
        {"job_id": STRING, "record": ref("JobRecord"), "waits": nullable({"type": "string", "description": WAITS})}
    ),
    "LogEntry": json_object(
        {
            "seq": INTEGER,
            "received_at": TIME,
            "event": {"type": "object", "properties": {"type": STRING}, "required": ["type"]},
        },
        ["seq", "event"],
    ),
    "EventsPage": json_object(
        {
            "job_id": STRING,
            "events": {"type": "array", "items": ref("LogEntry")},
            "next_after_seq": {"type": "integer", "description": "give it as after_seq for the next page"},
            "more": {"type": "boolean", "description": "the page stopped at its limit or byte budget"},
        }
    ),
    "LogPage": json_object(
        {"job_id": STRING, "events": {"type": "array", "items": {"type": "object"}}, "start": INTEGER, "end": INTEGER}
    ),
    "OutputRange": json_object(
        {"job_id": STRING, "offset": INTEGER, "next_offset": INTEGER, "total": INTEGER, "text": STRING, "eof": BOOLEAN},
        more=False,
    ),
    "Runner": json_object(
        {
            "agent_id": STRING,
            "agent": STRING,
            "status": {"type": "string", "examples": ["online", "offline", "draining"]},
            "busy": INTEGER,
            "capacity": INTEGER,
            "jobs": {"type": "array", "items": STRING},
            "last_seen": TIME,
            "host": STRING,
            "pid": INTEGER,
            "started_at": TIME,
            "aliases": {"type": "array", "items": STRING},
        }
    ),
    "Runners": json_object({"runners": {"type": "array", "items": ref("Runner")}}),
    "Totals": TOTALS,
    "UsageReport": json_object(
        {
            "by": {"enum": list(BY)},
            "since": nullable("string"),
            "groups": {
                "type": "array",
                "items": {"allOf": [ref("Totals"), json_object({"key": STRING, "depth": INTEGER}, ["key"])]},
            },
            "total": ref("Totals"),
        }
    ),
    "Stats": json_object(
        {
            "bucket_s": INTEGER,
            "from": TIME,
            "to": TIME,
            "outcomes": {"type": "array", "items": {"enum": list(OUTCOMES)}},
            "agents": {"type": "array", "items": STRING},
            "finished": {
                "type": "array",
                "items": json_object({"t": TIME, **dict.fromkeys(OUTCOMES, INTEGER)}, ["t", *OUTCOMES]),
            },
            "queue": {"type": "array", "items": json_object({"t": TIME, "queued": INTEGER, "running": INTEGER})},
            "cost": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"t": TIME},
                    "required": ["t"],
                    "additionalProperties": {"type": "number"},
                },
            },
        }
    ),
    "Verdict": json_object({"job_id": STRING, "status": ref("Status")}),
    "CancelVerdict": json_object(
        {
            "job_id": STRING,
            "status": ref("Status"),
            "tree": {
                "type": "array",
                "items": json_object({"job_id": STRING, "status": ref("Status"), "cancel_requested": BOOLEAN}),
            },
        },
        ["job_id", "status"],
    ),
    "RetryVerdict": json_object({"job_id": STRING, "status": ref("Status"), "retry_of": STRING}),
    "SubmitRequest": job_spec.request_schema("api"),
    "CancelRequest": json_object({"reason": STRING, "tree": BOOLEAN}, [], more=False),
    "RetryRequest": json_object({"job_id": {"type": "string", "description": "the new job's id"}}, [], more=False),
    "AnswerRequest": json_object({"answer": STRING, "question_id": STRING}, ["answer"]),
    "LandRequest": json_object({"squash": BOOLEAN}, []),
    "Diff": json_object(
        {"job_id": STRING, "branch": nullable("string"), "stat": STRING, "diff": STRING, "cut": BOOLEAN},
        ["job_id", "diff"],
    ),
    "Landed": json_object({"job_id": STRING, "done": STRING}),
}
