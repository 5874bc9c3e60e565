"""The job spec over real front ends: `mam submit` subprocesses, HTTP to a real `mam up --dashboard`, and the
official `mcp` SDK client against a real `mam mcp`, on one workspace. The same options are recorded the same
way from each (priority and require included, which `POST /api/jobs` refused before), the same bad value is
refused by each naming the option, unknown jobs are 404 over HTTP, MCP answers are compact and its hint for
an unknown agent names a runner command that starts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dashboard_server_support import request
from dashboard_support import publisher, up_dashboard_process
from mcp_support import mcp_session

from mam.contract.errors import UsageError

from support import mam, run
from workspace_support import WorkspacePaths

JSON = {"Content-Type": "application/json"}
OPTIONS = {
    "priority": 7,
    "require": {"gpu": "a100"},
    "max_turns": 3,
    "labels": {"via": "spec"},
    "role": "r",
    "parent_close": "abandon",
}
BAD = [
    ("priority", 5000, "--priority", "5000"),
    ("max_turns", 0, "--max-turns", "0"),
    ("retries", 101, "--retries", "101"),
    ("role", "r" * 300, "--role", "r" * 300),
    ("parent_close", "terminate", "--parent-close", "terminate"),
]


async def post(page: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, _, data = await request(page, "POST", path, body=json.dumps(body).encode(), headers=JSON)
    return status, json.loads(data)


async def record(page: str, job_id: str) -> dict[str, Any]:
    status, _, data = await request(page, "GET", f"/api/jobs/{job_id}")
    assert status == 200, data
    answer: dict[str, Any] = json.loads(data)["record"]
    return answer


def kept(rec: dict[str, Any]) -> dict[str, Any]:
    return {name: rec.get(name) for name in OPTIONS}


async def test_every_front_end_records_the_same_options_and_refuses_the_same_values(ws: WorkspacePaths) -> None:
    async with up_dashboard_process(ws) as (url, page, _):
        env_ws = ["--workspace", str(ws.root), "--broker", url]
        cli = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "nobody",
                "--job-id",
                "via-cli",
                "--priority",
                "7",
                "--require",
                "gpu=a100",
                "--max-turns",
                "3",
                "--label",
                "via=spec",
                "--role",
                "r",
                "--parent-close",
                "abandon",
                *env_ws,
            ),
            cwd=ws.elsewhere,
        )
        assert cli.returncode == 0, cli.stderr.decode()
        status, made = await post(page, "/api/jobs", {"agent": "nobody", "prompt": "p", "job_id": "via-api", **OPTIONS})
        assert status == 201, made
        async with mcp_session(ws, "--broker", url) as session:
            result = await session.call_tool(
                "submit_job", {"agent": "nobody", "prompt": "p", "job_id": "via-mcp", **OPTIONS}
            )
            assert not result.is_error, result.content
            text = result.content[0].text  # type: ignore[union-attr]
            assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)  # compact
            assert json.loads(text)["job_id"] == "via-mcp"

            mcp_refusals = {}
            for name, value, _, _ in BAD:
                bad = await session.call_tool("submit_job", {"agent": "nobody", "prompt": "p", name: value})
                assert bad.is_error
                mcp_refusals[name] = bad.content[0].text  # type: ignore[union-attr]

            claude = await session.call_tool("submit_job", {"agent": "claude", "prompt": "p"})
            waiting = json.loads(claude.content[0].text)["waiting"]  # type: ignore[union-attr]
            assert "did you mean 'claude-code'?" in waiting and "--profile claude-code" in waiting, waiting
            assert "`mam-agent --agent claude`" not in waiting, waiting

        assert (
            kept(await record(page, "via-cli"))
            == kept(await record(page, "via-api"))
            == kept(await record(page, "via-mcp"))
            == OPTIONS
        )

        for name, value, flag, typed in BAD:
            status, answer = await post(page, "/api/jobs", {"agent": "nobody", "prompt": "p", name: value})
            assert status == 400 and answer["error"].startswith(f"{name}: "), answer
            cli = await run(mam("submit", "--prompt", "p", "--agent", "nobody", flag, typed, *env_ws), cwd=ws.elsewhere)
            said = cli.stderr.decode()
            assert cli.returncode == 2 and flag in said and said.count("\n") == 1, said
            line = mcp_refusals[name]
            assert f"{name}: " in line and "\n" not in line and "pydantic" not in line and "http" not in line, line

        status, answer = await post(page, "/api/jobs/nosuch-job/cancel", {})
        assert status == 404 and "nosuch-job" in answer["error"], answer
        status, answer = await post(page, "/api/jobs/nosuch-job/retry", {})
        assert status == 404 and "nosuch-job" in answer["error"], answer
        status, answer = await post(page, "/api/jobs/nosuch-job/answer", {"answer": "yes"})
        assert status == 404 and "nosuch-job" in answer["error"], answer


async def test_an_out_of_range_priority_is_refused_in_mams_words_by_every_front_end(ws: WorkspacePaths) -> None:
    """`mam submit --priority 99999999` said msgspec's "Expected `int` <= 1000", and the API the same: now each
    front end says the range and where to read more, naming its flag or field, and publishes nothing."""
    words = "99999999 is out of range: give -1000 to 1000 (higher runs first; {doc})"
    async with up_dashboard_process(ws) as (url, page, _):
        env_ws = ["--workspace", str(ws.root), "--broker", url]
        for typed, said in (
            ("99999999", words.format(doc="docs/cli.md")),
            ("high", "'high' is not a whole number: give -1000 to 1000 (higher runs first; docs/cli.md)"),
        ):
            cli = await run(
                mam("submit", "--prompt", "p", "--agent", "nobody", "--priority", typed, *env_ws), cwd=ws.elsewhere
            )
            assert cli.returncode == 2 and cli.stderr.decode() == f"mam: error: --priority {said}\n", cli.stderr
        status, answer = await post(page, "/api/jobs", {"agent": "nobody", "prompt": "p", "priority": 99999999})
        assert status == 400 and answer == {"error": "priority: " + words.format(doc="docs/api.md")}, answer
        async with mcp_session(ws, "--broker", url) as session:
            result = await session.call_tool("submit_job", {"agent": "nobody", "prompt": "p", "priority": 99999999})
            assert result.is_error
            assert result.content[0].text == "priority: " + words.format(doc="docs/mcp.md")  # type: ignore[union-attr]
        async with publisher(url, ws) as pub:
            with pytest.raises(UsageError) as refused:
                await pub.submit(prompt="p", agent="nobody", priority=99999999)
        assert str(refused.value) == "priority: " + words.format(doc="docs/cli.md#python-api")
        status, _, listed = await request(page, "GET", "/api/jobs")
        assert status == 200 and json.loads(listed)["total"] == 0  # nothing was published
