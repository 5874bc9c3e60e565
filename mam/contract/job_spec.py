"""The job spec: every option a job is submitted with, as every front end takes it.

`JobSpec` is what a job is (its prompt, agent, session, role, labels, parent, run limit, the job it resumes)
and the options it carries from submit to record, which it inherits from `mam.contract.job_options.JobOptions`
(their types and bounds are the `submitted` event's own, `mam.contract.events`); `OPTIONS` says for each its help
text, its `mam submit` flag and which front ends take it. From them come the body `POST /api/jobs` decodes
(`JobSpec` itself), the OpenAPI request schema and the MCP `submit_job` arguments (`option_schema`), `mam
submit`'s flags (`mam.cli.option_flags`), and the event all of them publish (`submitted`); `Publisher.submit`
takes the same keywords, and `tests/contract/test_job_spec.py` holds the docs' tables to it.

Adding an option: see `mam.contract.job_options` (its field, its entry in `ABOUT`, its place in `Submitted`
and `JobRecord`); nothing here names it.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final, Union, get_args, get_origin, get_type_hints

import msgspec
from msgspec import UnsetType
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.arg_limits import at_most, schema_limit
from mam.contract.errors import UsageError
from mam.contract.event_parts import GitInfo, ShortText
from mam.contract.job_options import ABOUT, FRONTS, NAMES, JobOptions, Option, given, value
from mam.contract.value_words import Field, Front, decode_body, msgspec_refusal, refusal, unknown


class JobSpec(JobOptions, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A job's options as a front end took them; an option left out is None, or UNSET for those of `JobOptions`
    (either: its default)."""

    prompt: ev.Prompt
    agent: ev.AgentName
    job_id: ev.JobId | None = None
    agent_session: ShortText | None = None
    role: ShortText | None = None
    labels: ev.Labels | None = None
    parent: ev.JobId | None = None
    no_parent: bool | None = None
    job_timeout: ev.Seconds | None = None
    timeout: ev.Seconds | None = None
    resume: ev.JobId | None = None


_OWN: Final[dict[str, Option]] = {
    "prompt": Option("what the job should do; the agent gets it on stdin", "--prompt"),
    "agent": Option(
        "the agent that should run it (a runner `mam-agent --agent NAME` claims it), e.g. claude-code", "--agent"
    ),
    "job_id": Option("the new job's id (default: generated)", "--job-id"),
    "agent_session": Option("the agent session it belongs to (`mam session create`)", "--agent-session"),
    "role": Option("the role the agent plays in it, e.g. reviewer", "--role"),
    "labels": Option('labels to find it by later, e.g. {"ticket": "12"} (`--label ticket=12`)', "--label"),
    "parent": Option(
        "the job that delegates this one (default: the job this runs inside, $MAM_JOB_ID; none from the dashboard)",
        "--parent",
    ),
    "no_parent": Option(
        "true: a root job even inside a job (no parent from $MAM_JOB_ID)",
        "--no-parent",
        frozenset({"cli", "python", "mcp"}),
        default=False,
    ),
    "job_timeout": Option(
        "seconds the job may run before its runner stops it (its run limit); time spent waiting "
        "for a person does not count",
        "--job-timeout",
        unit="seconds",
    ),
    "timeout": Option(
        "deprecated: the old name of job_timeout (the run limit, not a wait); give job_timeout",
        None,
        frozenset({"python", "api", "mcp"}),
        deprecated=True,
        unit="seconds",
    ),
    "resume": Option(
        "a finished job whose agent session this one continues with the new prompt (claude --resume, "
        "codex exec resume, gemini --resume), on the same agent",
        "--resume",
    ),
}
_RESUME_AFTER: Final = "after"
"""The option the docs have always listed `resume` after."""


def _options() -> dict[str, Option]:
    out = {name: option for name, option in _OWN.items() if name != "resume"}
    for name, option in ABOUT.items():
        out[name] = option
        if name == _RESUME_AFTER:
            out["resume"] = _OWN["resume"]
    return out


OPTIONS: Final[dict[str, Option]] = _options()
"""Every `JobSpec` field: what the front ends show of it, in the order they list them."""
REQUIRED: Final = ("prompt", "agent")


def names(front: Front) -> list[str]:
    """The options `front` takes, in `JobSpec`'s order."""
    return [name for name, option in OPTIONS.items() if front in option.fronts]


def option_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one option as the HTTP body and the MCP tool take it: its bounds, help and default."""
    schema = _schemas()[name]
    out: dict[str, Any] = {**schema, "description": OPTIONS[name].help}
    if name not in REQUIRED:
        out = {
            "anyOf": [schema, {"type": "null"}],
            "description": OPTIONS[name].help,
            "default": None,
        }  # null: the option's default (its help says which)
    if OPTIONS[name].deprecated:
        out["deprecated"] = True
    return out


def request_schema(front: Front) -> dict[str, Any]:
    """The JSON Schema of a `front`'s whole request: its options, `prompt` and `agent` required, no others."""
    return {
        "type": "object",
        "properties": {name: option_schema(name) for name in names(front)},
        "required": list(REQUIRED),
        "additionalProperties": False,
    }


def _schemas() -> dict[str, dict[str, Any]]:
    (schema,), defs = msgspec.json.schema_components([JobSpec])
    assert not defs.keys() - {"JobSpec"}
    properties: dict[str, dict[str, Any]] = defs["JobSpec"]["properties"]
    plain: dict[str, dict[str, Any]] = {}
    for name, prop in properties.items():
        options = [p for p in prop.get("anyOf", [prop]) if p != {"type": "null"}]
        plain[name] = {k: v for k, v in options[0].items() if k != "default"}
    return plain


_COUNTED: Final = {"after": "jobs", "labels": "labels"}
"""What a list option's items are called in its refusal (`after: 10000 jobs given; the limit is 64`)."""
UNITS: Final = {name: option.unit for name, option in OPTIONS.items() if option.unit}
"""What each numeric option counts, for the range in its refusal (`give more than 0 and at most 2,678,400 seconds`)."""


@cache
def fields() -> dict[str, Field]:
    """Each option as a refusal names it: its help, its `mam submit` flag, its unit (`mam.contract.value_words`)."""
    return {name: Field(option.help, option.flag, UNITS.get(name, "")) for name, option in OPTIONS.items()}


@cache
def _most() -> dict[str, int]:
    """The options with a bounded length (a list or a map) and the bound."""
    out: dict[str, int] = {}
    for name in OPTIONS:
        try:
            out[name] = schema_limit(JobSpec, name)
        except LookupError:
            pass
    return out


@cache
def _field_types() -> dict[str, Any]:
    """Each option's type as a value is checked against it: None (left out) taken, UNSET not."""
    return {name: _optional(kind) for name, kind in get_type_hints(JobSpec, include_extras=True).items()}


def _optional(kind: Any) -> Any:
    if get_origin(kind) is not Union:
        return kind
    kept = tuple(arg for arg in get_args(kind) if arg is not UnsetType)
    return Union[(*kept, type(None))]  # noqa: UP007 - built from a tuple of types


def check_value(name: str, value: object, front: Front = "python") -> object:
    """`value` as option `name` takes it; `UsageError` naming the option in `front`'s words (`retries: 500 is
    out of range: give 0 to 100 (retry policy: ...; docs/mcp.md)`)."""
    if name not in OPTIONS:
        raise UsageError(unknown([name], OPTIONS, kind="option"))
    if isinstance(value, list | dict) and name in _most():  # by count first: 10,000 ids are not echoed
        at_most(
            fields()[name].flag or name if front == "cli" else name, value, _most()[name], _COUNTED.get(name, "items")
        )
    try:
        return msgspec.convert(value, type=_field_types()[name])
    except msgspec.ValidationError:
        raise UsageError(refusal(name, value, _schemas()[name], front, fields()[name])) from None


def decode(body: bytes, front: Front = "api") -> JobSpec:
    """A JSON body as a `JobSpec`; `UsageError` naming the option that is unknown or out of bounds, and its value."""
    given = decode_body(body, front)
    if not isinstance(given, dict):
        raise UsageError(f"bad request: the body is a JSON {type(given).__name__}, not an object of job options")
    return convert(given, keep_nulls=True, front=front)


def convert(arguments: dict[str, Any], *, keep_nulls: bool = False, front: Front = "python") -> JobSpec:
    """Keyword arguments (the Python API's, the MCP tool's, a decoded body, `mam submit`'s flags) as a `JobSpec`,
    None for left out; `UsageError` in `front`'s words naming every option unknown or missing, or the one out
    of bounds, and its value."""
    given = {k: v for k, v in arguments.items() if v is not None or (keep_nulls and k not in NAMES)}
    try:
        return msgspec.convert(given, type=JobSpec)
    except msgspec.ValidationError as exc:
        raise UsageError(msgspec_refusal(exc, given, _listed(), front, fields(), kind=_KIND[front])) from None


@cache
def _listed() -> type:
    """`JobSpec` with its fields in `OPTIONS`' order, for a refusal's list of them (`known: prompt, agent, ...`;
    `JobSpec` has `JobOptions`' fields first)."""
    hints = get_type_hints(JobSpec, include_extras=True)
    found = {f.name: f for f in msgspec.structs.fields(JobSpec)}
    listed = [(n, hints[n]) if found[n].required else (n, hints[n], found[n].default) for n in OPTIONS]
    return msgspec.defstruct("JobSpec", listed, kw_only=True, forbid_unknown_fields=True, module=__name__)


_KIND: Final[dict[Front, str]] = {"cli": "option", "python": "keyword", "api": "field", "mcp": "argument"}
"""What a front end calls a job option, in a refusal naming one unknown or missing."""


def run_limit(spec: JobSpec) -> float | None:
    """The run limit: `job_timeout`, or `timeout` (its old name); both given must agree."""
    if spec.timeout is not None and spec.job_timeout is not None and spec.timeout != spec.job_timeout:
        raise UsageError(
            f"timeout: {spec.timeout:g} is the old name of job_timeout, which is "
            f"{spec.job_timeout:g}: give job_timeout only"
        )
    return spec.job_timeout if spec.job_timeout is not None else spec.timeout


def _takes(name: str) -> str:
    """The values an option takes, in a few words, from its schema."""
    schema = _schemas()[name]
    if "enum" in schema:
        return ", ".join(map(str, schema["enum"]))
    kind = schema.get("type", "")
    if kind == "array":
        items = schema.get("items", {})
        return "list of " + (", ".join(items["enum"]) if "enum" in items else "job ids")
    if kind == "object":
        return "object of key: value"
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum")
    number = "integer" if kind == "integer" else "number"
    if low is None:
        if high is None:
            return {"string": "text", "boolean": "true/false"}.get(kind, kind)
        return f"{number} <= {_number(high)}"
    sign = ">" if "exclusiveMinimum" in schema else ">="
    upper = f", <= {_number(high)}" if high is not None and high < 2**53 - 1 else ""
    return f"{number} {sign} {_number(low)}{upper}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def table() -> str:
    """The docs' table of the options (docs/api.md): name, flag, values, front ends, help."""
    rows = [
        "| option | `mam submit` | takes | HTTP | MCP | Python | what it does |",
        "| --- | --- | --- | :-: | :-: | :-: | --- |",
    ]
    for name, option in OPTIONS.items():
        marks = " | ".join("yes" if front in option.fronts else "-" for front in ("api", "mcp", "python"))
        flag = f"`{option.flag}`" if option.flag else "-"
        rows.append(f"| `{name}` | {flag} | {_takes(name)} | {marks} | {option.help.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def submitted(
    spec: JobSpec, *, parent: str | None, git: GitInfo | None, after: list[str] | None = None
) -> ev.Submitted:
    """The `submitted` event for `spec`: an option left out stays UNSET, so the event has the bytes it had before
    the option existed. `parent` and `after` are as the front end resolved them (the job it runs inside, short
    ids); `resume` is resolved by the caller (`mam.cli.limits.resume_fields`), it needs the old job."""
    if value(spec, "retries") is None and (which := [n for n in ("retry_on", "backoff") if value(spec, n) is not None]):
        raise UsageError(f"{which[0]}: needs retries (how many more attempts)")
    options = given(spec if after is None else replace(spec, after=after))
    return ev.Submitted(
        prompt=spec.prompt,
        agent=spec.agent,
        agent_session=spec.agent_session,
        role=spec.role,
        labels=spec.labels or {},
        timeout=run_limit(spec),
        parent=parent,
        git=git,
        **options,
    )


__all__ = [
    "FRONTS",
    "OPTIONS",
    "REQUIRED",
    "UNITS",
    "Front",
    "JobOptions",
    "JobSpec",
    "Option",
    "check_value",
    "convert",
    "decode",
    "fields",
    "names",
    "option_schema",
    "request_schema",
    "run_limit",
    "submitted",
    "table",
]
