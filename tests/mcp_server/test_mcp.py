"""`mam mcp`: an MCP client from the `mcp` SDK, over stdio, against a real `mam up` and a real runner."""

from __future__ import annotations

from typing import Any

import anyio
from agent_clis import CLIS
from mcp_support import call, mcp_session, refused
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_runner
from runner_support import agent_runner, mock_command

from brokers import free_port
from e2e import up_process, workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths


def claude_script() -> Script:
    """The real Claude Code's model, for the MCP client's two claude jobs in turn: an answer; a Write (refused at
    read-only), then what it says of it."""
    return Script(
        [
            Turn(text="the repo is empty", input_tokens=1000, output_tokens=345),
            Turn(tool="Write", args={"file_path": "notes.md", "content": "notes\n"}),
            Turn(text="I could not edit notes.md"),
        ]
    )


TOOLS = {
    "submit_job",
    "get_job",
    "list_jobs",
    "wait_job",
    "job_output",
    "cancel_job",
    "answer_job",
    "list_agents",
    "ask_person",
    "retry_job",
    "job_events",
}


async def test_tools_are_listed_with_schemas_and_bad_calls_are_tool_errors(ws: WorkspacePaths) -> None:
    """No broker needed to list the tools, or to be told a job does not exist; the server stays up after."""
    async with mcp_session(ws) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) >= TOOLS
        submit = tools["submit_job"].input_schema
        assert set(submit["required"]) == {"prompt", "agent"}
        assert {"role", "labels", "parent", "timeout", "wait"} <= set(submit["properties"])
        assert submit["properties"]["wait"]["default"] is True
        assert tools["list_jobs"].input_schema["properties"]["status"]["items"]["enum"][0] == "submitted"
        assert tools["wait_job"].input_schema["required"] == ["job"]
        assert tools["wait_job"].output_schema is not None
        assert {"status", "result", "exit_code", "error", "output_tail"} <= set(
            tools["wait_job"].output_schema["properties"]
        )

        assert "no job 'nope'" in await refused(session, "get_job", job="nope")
        assert "invalid job id '../x'" in await refused(session, "wait_job", job="../x")
        assert "status: 'done' is not a status" in await refused(session, "list_jobs", status=["done"])
        assert await call(session, "list_jobs") == {"jobs": [], "total": 0}
        # Checked before anything is published, with the argument named:
        assert 'agent: "bad agent!" may contain only' in await refused(
            session, "submit_job", prompt="p", agent="bad agent!"
        )
        assert 'role: "rrrr' in (
            long_role := await refused(session, "submit_job", prompt="p", agent="a", role="r" * 300)
        )
        assert "is too long: 300 characters, at most 256" in long_role and "\n" not in long_role
        assert "labels: the key 'no spaces' may contain only" in await refused(
            session, "submit_job", prompt="p", agent="a", labels={"no spaces": "v"}
        )
        assert "prompt: the prompt is empty" in await refused(session, "submit_job", prompt=" ", agent="a")


async def test_the_server_ends_when_its_client_closes_stdin(ws: WorkspacePaths) -> None:
    result = await run(mam("mcp", "--workspace", str(ws.root)), cwd=ws.elsewhere, input=b"", timeout=20)
    assert result.returncode == 0 and result.stdout == b"", "stdout carries the protocol only"
    assert b"mcp server for workspace" in result.stderr


async def test_delegate_wait_and_read_through_mcp(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, *mock_command()),
        real_runner(CLIS["claude-code"], url, ws, claude_script(), name="r2"),
        mcp_session(ws, "--broker", url) as session,
    ):
        claude = await call(session, "submit_job", prompt="summarise the repo", agent="claude-code")
        answered = await call(session, "wait_job", job=claude["job_id"], timeout=JOB_TIMEOUT)
        assert answered["status"] == "succeeded" and answered["result"] == "the repo is empty", answered
        cost = answered["usage"]["cost_usd"]
        assert cost > 0 and answered["usage"]["output_tokens"] == 345

        submitted = await call(
            session,
            "submit_job",
            prompt="echo stream 3",
            agent="mock",
            role="tester",
            labels={"ticket": "12"},
            timeout=60,
        )
        job = submitted["job_id"]
        assert submitted["recorded"] is True and submitted["job"]["job_id"] == job
        assert submitted["job"]["labels"] == {"ticket": "12"} and submitted["job"]["role"] == "tester"

        ended = await call(session, "wait_job", job=job[-6:], timeout=30)
        assert ended["status"] == "succeeded" and ended["exit_code"] == 0
        assert "line 2" in (ended["result"] or "") and ended["output_tail"].endswith("line 2\n")
        assert f"job={job}" in ended["output_tail"]

        output = await call(session, "job_output", job=job)
        assert output["status"] == "succeeded" and not output["truncated"]
        assert output["text"].startswith("prompt=echo stream 3\n") and output["text"].endswith("line 2\n")
        assert (await call(session, "job_output", job=job, tail_bytes=7))["text"] == "line 2\n"
        later = await call(session, "job_output", job=job, from_seq=output["next_seq"])
        assert later["text"] == "" and later["next_seq"] == output["next_seq"]

        queued = await call(session, "submit_job", prompt="p", agent="nobody", labels={"ticket": "13"})
        assert queued["status"] == "submitted"
        assert "no runner for 'nobody' is online" in queued["waiting"]
        unconfirmed = await call(session, "submit_job", prompt="p", agent="nobody", wait=False)
        assert unconfirmed["recorded"] is False
        await wait_for_state(url, workspace_id(ws.root), unconfirmed["job_id"])

        listed = await call(session, "list_jobs", status=["succeeded"])
        assert [j["job_id"] for j in listed["jobs"]] == [job, claude["job_id"]] and listed["total"] == 2
        assert {j["job_id"] for j in (await call(session, "list_jobs", agent="nobody"))["jobs"]} == {
            queued["job_id"],
            unconfirmed["job_id"],
        }
        assert [j["job_id"] for j in (await call(session, "list_jobs", labels={"ticket": "13"}))["jobs"]] == [
            queued["job_id"]
        ]
        newest = await call(session, "list_jobs", limit=1)
        assert newest["total"] == 4 and len(newest["jobs"]) == 1
        (summary,) = (await call(session, "list_jobs", agent="claude-code"))["jobs"]
        assert summary["usage"]["cost_usd"] == cost and summary["prompt"] == "summarise the repo"

        record = await call(session, "get_job", job=job)
        assert record["status"] == "succeeded" and record["prompt"] == "echo stream 3"

        reader = await call(
            session, "submit_job", prompt="please edit the notes", agent="claude-code", permissions="read-only"
        )
        assert reader["job"]["permissions"] == "read-only"
        read_only = await call(session, "wait_job", job=reader["job_id"], timeout=JOB_TIMEOUT)
        assert read_only["status"] == "succeeded" and read_only["result"] == "I could not edit notes.md"
        whole = await call(session, "get_job", job=reader["job_id"], full=True)
        assert whole["denials"] == [f"Write {ws.root / 'notes.md'}"] and not (ws.root / "notes.md").exists()


async def test_cancel_through_mcp_and_refusals_come_back_as_tool_errors(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, *mock_command()),
        mcp_session(ws, "--broker", url) as session,
    ):
        job = (await call(session, "submit_job", prompt="hang", agent="mock"))["job_id"]
        await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] == "running")
        with anyio.fail_after(20):
            running_wait = await session.call_tool("wait_job", {"job": job, "timeout": 0.5})
        assert running_wait.is_error and "had not ended within 0.5s; it is running" in str(running_wait.content)

        ended: dict[str, Any] = {}

        async def wait() -> None:  # on the server's one connection, beside the cancel
            ended.update(await call(session, "wait_job", job=job, timeout=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            requested = await call(session, "cancel_job", job=job, reason="enough")
            assert requested["job"]["cancel_reason"] == "enough"
        assert ended["status"] == "cancelled" and "hanging" in ended["output_tail"]

        assert "the projector refused the event" in await refused(session, "cancel_job", job=job)
        # A write takes a prefix or suffix of at least 4 characters, as `mam cancel` does.
        assert f"too short to cancel a job: type its whole id ({job})" in await refused(
            session, "cancel_job", job=job[-3:]
        )
        assert f"too short to retry a job: type its whole id ({job})" in await refused(
            session, "retry_job", job=job[-3:]
        )
        assert "unknown parent job 'missing'" in await refused(
            session, "submit_job", prompt="p", agent="mock", parent="missing"
        )
        assert (await call(session, "get_job", job=job))["status"] == "cancelled"  # still serving

        # A retry policy and dependencies, as `mam submit --retries/--retry-on/--backoff/--after`: after a
        # cancelled job (named by a suffix), the job is cancelled at once with a reason naming it.
        after = await call(
            session,
            "submit_job",
            prompt="p",
            agent="nobody",
            after=[job[-8:]],
            retries=2,
            retry_on=["failed", "timed_out"],
            backoff=0.5,
        )
        recorded = after["job"]
        assert (recorded["after"], recorded["retries"], recorded["retry_on"], recorded["backoff"]) == (
            [job],
            2,
            ["failed", "timed_out"],
            0.5,
        )
        assert recorded["status"] == "blocked", recorded  # the verdict on the submit; then, derived:
        ended = await wait_for_state(url, workspace_id(ws.root), after["job_id"], lambda r: r["status"] == "cancelled")
        assert job in ended["cancel_reason"], ended
        assert "missing" in await refused(session, "submit_job", prompt="p", agent="mock", after=["missing"])


async def test_a_job_submitted_from_inside_a_job_gets_it_as_parent(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        async with mcp_session(ws, "--broker", url) as session:
            outer = (await call(session, "submit_job", prompt="delegate", agent="nobody"))["job_id"]
        async with mcp_session(ws, "--broker", url, MAM_JOB_ID=outer) as inside:
            child = await call(inside, "submit_job", prompt="a part of it", agent="nobody")
            assert child["parent"] == outer and child["job"]["parent"] == outer
            other = await call(inside, "submit_job", prompt="elsewhere", agent="nobody", parent=child["job_id"])
            assert other["job"]["parent"] == child["job_id"]
            children = await call(inside, "list_jobs", parent=outer)
            assert [j["job_id"] for j in children["jobs"]] == [child["job_id"]]


async def test_the_server_outlives_its_broker(ws: WorkspacePaths) -> None:
    """Started before any broker, it says so per call; once one is up it connects at the next call; when that
    broker goes away it still reads the registry, says why it cannot write, and writes again once it is back."""
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with mcp_session(ws, "--broker", url) as session:
        assert f"cannot reach the MQTT broker at {url}" in await refused(
            session, "submit_job", prompt="p", agent="nobody"
        )
        async with up_process(ws.root, ws.elsewhere, port):
            job = (await call(session, "submit_job", prompt="p", agent="nobody"))["job_id"]
        assert (await call(session, "get_job", job=job))["status"] == "submitted"
        assert f"cannot reach the MQTT broker at {url}" in await refused(session, "cancel_job", job=job)
        async with up_process(ws.root, ws.elsewhere, port):
            assert (await call(session, "cancel_job", job=job))["status"] == "cancelled"
