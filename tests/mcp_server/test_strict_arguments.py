"""Every MCP tool refuses an argument it does not know, naming the known ones and the nearest (`job_timout: 2` ran
with no run limit before), and says so in its input schema; a bad value is refused in mam's words, never
pydantic's or msgspec's. Through the official `mcp` SDK client against a real `mam mcp` (no broker: each
refusal comes before anything is published)."""

from __future__ import annotations

from typing import Any

from mcp_support import mcp_session, refused
from refusal_words_support import drawn, in_mams_words, refused_option

from mam.contract import job_spec

from workspace_support import WorkspacePaths

DUMMY = {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def _required(schema: dict[str, Any]) -> dict[str, Any]:
    """A value of the right type for each required argument (the unknown one is refused before they are used)."""
    props = schema["properties"]
    return {name: DUMMY[props[name].get("type", "string")] for name in schema.get("required", [])}


async def test_every_tool_refuses_an_unknown_argument_and_its_schema_says_so(ws: WorkspacePaths) -> None:
    async with mcp_session(ws) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert len(tools) >= 14
        for name, tool in tools.items():
            assert tool.input_schema["additionalProperties"] is False, name
            said = await refused(session, name, **_required(tool.input_schema), bogus_argument=1)
            known = ", ".join(tool.input_schema["properties"])
            assert said == f"unknown argument 'bogus_argument' for {name}; known: {known}", said

        typo = await session.call_tool("submit_job", {"prompt": "p", "agent": "shell", "job_timout": 2})
        assert typo.is_error, typo.structured_content
        said = typo.content[0].text  # type: ignore[union-attr]
        assert said.startswith(
            "unknown argument 'job_timout' for submit_job; did you mean 'job_timeout'? known: prompt, agent, job_id, "
        ), said
        assert "\n" not in said and said.endswith(", wait"), said
        assert (
            "unknown arguments 'bogus', 'priorty' (did you mean 'priority'?) for submit_job; known: "
            in await refused(session, "submit_job", prompt="p", agent="shell", bogus=1, priorty=5)
        )
        assert "unknown argument 'tail' for wait_job; did you mean 'tail_bytes'?" in await refused(
            session, "wait_job", job="x", tail=10
        )


async def test_bad_values_are_refused_in_mams_words_naming_the_argument(ws: WorkspacePaths) -> None:
    async with mcp_session(ws) as session:
        assert await refused(session, "submit_job", prompt="p", agent="shell", priority=99999999) == (
            "priority: 99999999 is out of range: give -1000 to 1000 (higher runs first; docs/mcp.md)"
        )
        assert await refused(session, "submit_job") == (
            "missing required arguments for submit_job: prompt, agent (see docs/mcp.md)"
        )
        assert await refused(session, "submit_job", prompt="p") == (
            "missing required argument for submit_job: agent (see docs/mcp.md)"
        )
        timeout = await refused(session, "wait_job", job="x", timeout=10**6)
        assert timeout.startswith("timeout: 1000000 is out of range: give more than 0 and at most 86,400 seconds ("), (
            timeout
        )
        in_mams_words(timeout, names="timeout: ")
        two = await refused(session, "job_output", job="x", tail_bytes="lots", from_seq=-1)
        assert 'tail_bytes: "lots" is not a whole number: give 1 or more bytes' in two and "from_seq: -1" in two, two
        in_mams_words(await refused(session, "list_jobs", status="running"), names="status: ")

        for name, value in drawn(43, 60, refused_option()):
            said = await refused(session, "submit_job", prompt="p", agent="shell", **{name: value})
            in_mams_words(said, names=f"{name}: ")
            assert said.endswith("; docs/mcp.md)"), said
            if job_spec.UNITS.get(name) and "give " in said:
                assert f" {job_spec.UNITS[name]} (" in said, said
