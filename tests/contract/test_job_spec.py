"""The job spec (`mam.contract.job_spec`) is what every front end takes: `mam submit`'s flags, `Publisher.submit`'s
keywords, the `POST /api/jobs` body and its OpenAPI schema, the MCP `submit_job` arguments, and the docs' lists
of them; a value one refuses, each refuses, naming the option (hypothesis over the bounded options)."""

from __future__ import annotations

import argparse
import re
from typing import Any, get_type_hints

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mam.agents.submit_keywords import SubmitKeywords
from mam.cli import build_parser
from mam.cli.submit import cli_spec
from mam.contract import job_spec
from mam.contract.errors import UsageError
from mam.mcp_server.server import build
from mam.process.argparse_internals import option_strings, subparsers_of
from mam.web.openapi import openapi

from support import CHECKOUT

DOCS = CHECKOUT / "docs"
BOUNDED = {
    "priority": int,
    "retries": int,
    "max_turns": int,
    "budget_tokens": int,
    "tree_budget_tokens": int,
    "job_timeout": float,
    "backoff": float,
    "budget_usd": float,
    "tree_budget_usd": float,
}
"""The options with numeric bounds, and the kind of number each takes."""


class _Served:
    parent = None
    workspace = None  # read by mcp_server/landing.py at registration, used only by its tools' calls


def mcp_tool() -> Any:
    async def tools() -> Any:
        return {tool.name: tool for tool in await build(_Served()).list_tools()}  # type: ignore[arg-type]

    return anyio.run(tools)["submit_job"]


def submit_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(subparsers_of(parser))
    return sub.choices["submit"]


@pytest.mark.fast
def test_every_option_is_declared_once_with_its_help_and_fronts() -> None:
    assert sorted(job_spec.OPTIONS) == sorted(job_spec.JobSpec.__struct_fields__)
    for name, option in job_spec.OPTIONS.items():
        assert option.help and option.fronts, name
        assert (option.flag is not None) == ("cli" in option.fronts), name


@pytest.mark.fast
def test_each_front_end_takes_exactly_its_options() -> None:
    flags = set(option_strings(submit_parser()))
    assert {job_spec.OPTIONS[n].flag for n in job_spec.names("cli")} <= flags
    python = set(get_type_hints(SubmitKeywords))  # `Publisher.submit`'s keyword form
    assert python == set(job_spec.names("python"))
    body = openapi()["components"]["schemas"]["SubmitRequest"]
    assert list(body["properties"]) == job_spec.names("api") and body["additionalProperties"] is False
    assert body["required"] == ["prompt", "agent"]
    tool = mcp_tool()
    assert set(tool.input_schema["properties"]) == {*job_spec.names("mcp"), "wait"}
    assert set(tool.input_schema["required"]) == {"prompt", "agent"}


@pytest.mark.fast
def test_the_bounds_are_the_same_in_every_schema() -> None:
    body = openapi()["components"]["schemas"]["SubmitRequest"]["properties"]
    tool = mcp_tool().input_schema["properties"]
    for name in job_spec.names("mcp"):
        spec = job_spec.option_schema(name)
        assert {k: v for k, v in tool[name].items() if k != "title"} == spec, name
        if name in body:
            assert body[name] == spec, name
    assert body["priority"]["anyOf"][0] == {"type": "integer", "minimum": -1000, "maximum": 1000}


def _cli(name: str, value: object) -> str | None:
    """Why `mam submit FLAG VALUE` is refused (argparse's or the spec's words), or None."""
    flag = job_spec.OPTIONS[name].flag
    assert flag is not None
    argv = ["--prompt", "p", "--agent", "a", f"{flag}={value}"]
    if name in ("backoff",):
        argv += ["--retries", "1"]
    parser = submit_parser()
    parser.error = lambda message: (_ for _ in ()).throw(UsageError(message))  # type: ignore[method-assign]
    try:
        args = parser.parse_args(argv)
        cli_spec(args, "p", "a")
    except UsageError as exc:
        return str(exc)
    return None


def _mcp(model: Any, name: str, value: object) -> str | None:
    try:
        model.model_validate({"prompt": "p", "agent": "a", name: value})
    except ValidationError as exc:
        return str(exc)
    return None


def _spec(name: str, value: object) -> str | None:
    try:
        job_spec.check_value(name, value)
    except UsageError as exc:
        return str(exc)
    return None


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(BOUNDED)),
    whole=st.integers(min_value=-(2**60), max_value=2**60),
    part=st.sampled_from([0.0, 0.5, 0.25]),
    near=st.booleans(),
)
def test_a_value_is_refused_by_every_front_end_or_by_none(name: str, whole: int, part: float, near: bool) -> None:
    if near:  # mostly around the bounds, where they could disagree
        whole = whole % 2003 - 1001
    value: float = whole if BOUNDED[name] is int else whole + part
    spec, mcp, cli = _spec(name, value), _mcp(_MODEL, name, value), _cli(name, value)
    assert (spec is None) == (mcp is None) == (cli is None), (name, value, spec, mcp, cli)
    if spec is not None:
        assert spec.startswith(f"{name}: ") and name in mcp  # type: ignore[operator]
        assert job_spec.OPTIONS[name].flag in cli  # type: ignore[operator]


def _tool_model() -> Any:
    server = build(_Served())  # type: ignore[arg-type]
    return server._tool_manager.get_tool("submit_job").fn_metadata.arg_model  # noqa: SLF001 - the SDK's model of a tool's arguments


_MODEL = _tool_model()


HOSTILE_WORDS = [
    "cancel",
    "abandon",
    "Cancel",
    "ABANDON",
    " cancel",
    "cancel\n",
    "abandon ",
    "terminate",
    "request_cancel",
    "",
    "-",
    "--abandon",
    "cancel,abandon",
    "\u0430bandon",
    "c\u0430ncel",
    "\x00",
]
"""Near misses of `parent_close`'s two words (case, spaces, Temporal's other policies, a Cyrillic a)."""


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(
        st.sampled_from(HOSTILE_WORDS),
        st.text(max_size=40),
        st.integers(),
        st.booleans(),
        st.lists(st.sampled_from(["cancel", "abandon"]), max_size=2),
    )
)
def test_parent_close_is_cancel_or_abandon_and_anything_else_is_refused_by_every_front_end_naming_it(
    value: object,
) -> None:
    valid = isinstance(value, str) and value in ("cancel", "abandon")
    spec, mcp = _spec("parent_close", value), _mcp(_MODEL, "parent_close", value)
    assert (spec is None) == (mcp is None) == valid, (value, spec, mcp)
    if spec is not None:
        assert spec.startswith("parent_close: ") and "\n" not in spec and "parent_close" in mcp  # type: ignore[operator]
    if isinstance(value, str) and "\x00" not in value:  # an argument can hold no NUL
        cli = _cli("parent_close", value)
        assert (cli is None) == valid, (value, cli)
        assert cli is None or "--parent-close" in cli


@pytest.mark.fast
@pytest.mark.parametrize(
    "name,value",
    [
        ("agent", "no body"),
        ("role", "r" * 300),
        ("labels", {"no spaces": "v"}),
        ("require", {"gpu": "x" * 300}),
        ("retry_on", ["soon"]),
        ("permissions", "root"),
        ("model", "-rf"),
        ("after", ["a b"]),
        ("job_id", "../x"),
    ],
)
def test_a_bad_value_of_any_other_option_is_refused_naming_it(name: str, value: Any) -> None:
    spec = _spec(name, value)
    assert spec is not None and spec.startswith(f"{name}: ") and "\n" not in spec
    assert _mcp(_MODEL, name, value) is not None


def _mentions(text: str, names: list[str], quote: str = "`") -> list[str]:
    return [name for name in names if f"{quote}{name}{quote}" not in text]


@pytest.mark.fast
def test_the_docs_list_every_option_of_each_front_end() -> None:
    api = (DOCS / "api.md").read_text()
    section = api[api.index("### `POST /api/jobs`") : api.index("### `POST /api/jobs/{id}/retry`")]
    assert _mentions(section, job_spec.names("api")) == []
    mcp = (DOCS / "mcp.md").read_text()
    row = next(line for line in mcp.splitlines() if line.startswith("| `submit_job`"))
    assert _mentions(row, job_spec.names("mcp")) == []
    cli = (DOCS / "cli.md").read_text()
    rows = "\n".join(line for line in cli.splitlines() if line.startswith("| `mam submit"))
    flags = [job_spec.OPTIONS[name].flag or "" for name in job_spec.names("cli")]
    missing = [flag for flag in flags if not re.search(re.escape(flag) + r"\b", rows)]
    assert missing == []
    assert (DOCS / "api.md").read_text().count(job_spec.table()) == 1
