"""MCP fits an agent's habits: list_agents, ask_person, retry_job, job_events, brief answers, wait_job's
timeout text and the run limit's one name, through the official `mcp` SDK client against a real `mam mcp`,
`mam up`, mock runners and the real Claude Code against its model server (issue 23)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from agent_clis import CLIS
from mcp_support import call, mcp_session, refused
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_runner
from runner_support import agent_runner, mock_command

from mam.agents import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.record import JobRecord
from mam.contract.workspace import resolve

from brokers import free_port
from e2e import up_process, workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths

NEW_TOOLS = {"list_agents", "ask_person", "retry_job", "job_events"}
BRIEF_MOST = 600
"""Bytes a brief get_job/submit_job answer of a finished claude job with a short prompt stays under (the whole
record: about 1.2 KB; docs/mcp.md)."""


def nulls(value: Any) -> list[str]:
    """The paths of the null values in `value`."""
    if isinstance(value, dict):
        return [f"{k}{'.' + p if p else ''}" for k, v in value.items() for p in ([""] if v is None else nulls(v))]
    if isinstance(value, list):
        return [f"{i}.{p}" for i, v in enumerate(value) for p in nulls(v)]
    return []


def size(value: Any) -> int:
    return len(json.dumps(value))


@pytest.mark.slow  # 6-7 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_list_agents_brief_answers_and_the_run_limits_names(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    (ws.root / ".mam").mkdir(exist_ok=True)
    (ws.root / ".mam" / "profiles.json").write_text(json.dumps({"reviewer-bot": {"argv": ["sh", "-s"]}}))
    prompt = "summarise the repo " + "x" * 3000
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, *mock_command(), "--concurrency", "2"),
        real_runner(
            CLIS["claude-code"],
            url,
            ws,
            Script([Turn(text="a summary", output_tokens=345), Turn(text="answer: " + prompt)]),
            name="r2",
        ),
        mcp_session(ws, "--broker", url) as session,
    ):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) >= NEW_TOOLS
        submit_schema = tools["submit_job"].input_schema["properties"]
        assert "job_timeout" in submit_schema and submit_schema["timeout"].get("deprecated") is True

        agents = await call(session, "list_agents")
        assert agents["agents"] == [
            {"agent": "claude-code", "runners": 1, "capacity": 1, "running": 0, "free": 1},
            {"agent": "mock", "runners": 1, "capacity": 2, "running": 0, "free": 2},
        ]
        assert {"claude-code", "codex", "shell", "reviewer-bot"} <= set(agents["profiles"]), agents

        submitted = await call(session, "submit_job", prompt="summarise the repo", agent="claude-code")
        assert nulls(submitted) == [] and size(submitted) < BRIEF_MOST, submitted
        assert "runner_epoch" not in submitted["job"] and "version" not in submitted["job"]
        assert "cut" not in submitted["job"]
        ended = await call(session, "wait_job", job=submitted["job_id"], timeout=JOB_TIMEOUT)
        assert ended["status"] == "succeeded" and nulls(ended) == [], ended
        assert ended["usage"]["output_tokens"] == 345 and ended["usage"]["cost_usd"] > 0
        short = await call(session, "get_job", job=submitted["job_id"])
        assert nulls(short) == [] and size(short) < BRIEF_MOST, short
        assert short["status"] == "succeeded" and short["usage"]["cost_usd"] == ended["usage"]["cost_usd"]
        whole = await call(session, "get_job", job=submitted["job_id"], full=True)
        assert whole["runner_epoch"] and "error" in whole and whole["error"] is None  # every key, as before
        print(f"short prompt: brief get_job {size(short)} bytes, full {size(whole)}; submit_job {size(submitted)}")

        long = await call(session, "submit_job", prompt=prompt, agent="claude-code")
        job = long["job_id"]
        assert long["job"]["cut"] == {"prompt": len(prompt)} and "full=true" in long["job"]["more"]
        assert (await call(session, "wait_job", job=job, timeout=JOB_TIMEOUT))["result"] == "answer: " + prompt
        cut = await call(session, "get_job", job=job)
        assert nulls(cut) == [] and size(cut) < 2 * 500 + 800, cut  # two texts cut to 500, the rest brief
        assert len(cut["prompt"]) < 530 and cut["cut"] == {"prompt": len(prompt), "result": len("answer: " + prompt)}
        whole = await call(session, "get_job", job=job, full=True)
        assert whole["prompt"] == prompt and whole["result"] == "answer: " + prompt and "cut" not in whole
        print(f"3,000-character prompt: brief get_job {size(cut)} bytes, full {size(whole)}; submit_job {size(long)}")

        # The run limit: job_timeout, and `timeout` still accepted as its deprecated alias.
        named = await call(session, "submit_job", prompt="p", agent="nobody", job_timeout=30)
        assert named["job"]["timeout"] == 30
        old = await call(session, "submit_job", prompt="p", agent="nobody", timeout=60)
        assert old["job"]["timeout"] == 60
        both = await refused(session, "submit_job", prompt="p", agent="nobody", timeout=60, job_timeout=30)
        assert "timeout: 60 is the old name of job_timeout, which is 30: give job_timeout only" in both

        listed = await call(session, "list_jobs")
        assert listed["total"] == 4 and nulls(listed) == [], listed

        # The Python API: the same name, the old one still taken (with a DeprecationWarning).
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            api = await pub.submit(prompt="p", agent="nobody", job_timeout=7, wait=True)
            with pytest.warns(DeprecationWarning, match="now named job_timeout"):
                old_api = await pub.submit(prompt="p", agent="nobody", timeout=9, wait=True)
        assert isinstance(api, JobRecord) and isinstance(old_api, JobRecord)
        assert (api.timeout, old_api.timeout) == (7, 9)


async def test_wait_job_slices_retry_job_and_job_events(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, *mock_command()),
        mcp_session(ws, "--broker", url) as session,
    ):
        hanging = (await call(session, "submit_job", prompt="hang", agent="mock"))["job_id"]
        await wait_for_state(url, workspace_id(ws.root), hanging, lambda r: r["status"] == "running")
        busy = await call(session, "list_agents")
        assert busy["agents"] == [{"agent": "mock", "runners": 1, "capacity": 1, "running": 1, "free": 0}]

        with anyio.fail_after(20):
            waited = await session.call_tool("wait_job", {"job": hanging, "timeout": 0.5})
        text = " ".join(getattr(block, "text", "") for block in waited.content)
        assert waited.is_error and "had not ended within 0.5s; it is running" in text, text
        assert f"call wait_job again with job='{hanging}'" in text and "mam logs" not in text
        assert "--timeout" not in text

        assert "only a finished job can be retried" in await refused(session, "retry_job", job=hanging)
        await call(session, "cancel_job", job=hanging, reason="enough")
        assert (await call(session, "wait_job", job=hanging, timeout=30))["status"] == "cancelled"

        failing = (
            await call(
                session,
                "submit_job",
                prompt="fail 3 " + "y" * 300,
                agent="mock",
                labels={"ticket": "7"},
                job_timeout=40,
            )
        )["job_id"]
        first = await call(session, "wait_job", job=failing, timeout=30)
        assert first["status"] == "failed" and first["exit_code"] == 3
        again = await call(session, "retry_job", job=failing[-6:])
        assert again["retry_of"] == failing and again["job_id"] != failing
        assert again["job"]["labels"] == {"ticket": "7"} and again["job"]["timeout"] == 40
        assert again["job"]["retry_of"] == failing and nulls(again) == []
        assert (await call(session, "wait_job", job=again["job_id"], timeout=30))["status"] == "failed"

        log = await call(session, "job_events", job=hanging)
        types = [event["type"] for event in log["events"]]
        assert types[:3] == ["submitted", "claimed", "started"] and types[-2:] == ["cancel_requested", "cancelled"]
        assert log["more"] is False and nulls(log) == []
        assert log["events"][-2]["reason"] == "enough" and log["events"][0]["by"] == "mam-mcp"
        assert [e["seq"] for e in log["events"]] == sorted(e["seq"] for e in log["events"])

        paged, seen, start = [], 0, 0
        while True:
            part = await call(session, "job_events", job=hanging, from_seq=start, limit=2)
            paged += part["events"]
            seen += 1
            start = part["next_seq"]
            if not part["more"]:
                break
        assert paged == log["events"] and seen == (len(types) + 1) // 2

        only = await call(session, "job_events", job=hanging, types=["cancelled", "claimed"])
        assert [e["type"] for e in only["events"]] == ["claimed", "cancelled"]
        submitted = (await call(session, "job_events", job=failing, types=["submitted"]))["events"][0]
        assert submitted["cut"] == {"prompt": len("fail 3 " + "y" * 300)} and len(submitted["prompt"]) < 260
        whole = (await call(session, "job_events", job=failing, types=["submitted"], full=True))["events"][0]
        assert whole["prompt"] == "fail 3 " + "y" * 300 and whole["id"]

        assert "types: 'done' is not an event type" in await refused(session, "job_events", job=hanging, types=["done"])


async def test_ask_person_inside_a_job_is_answered_by_mam_answer_across_calls(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, *mock_command()),
    ):
        async with mcp_session(ws, "--broker", url) as outside:
            job = (await call(outside, "submit_job", prompt="hang", agent="mock"))["job_id"]
            await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] == "running")
            assert "MAM_JOB_ID is not set" in await refused(outside, "ask_person", question="Proceed?")

        async with mcp_session(ws, "--broker", url, MAM_JOB_ID=job) as inside:  # as the job's agent sees it
            asked = await call(inside, "ask_person", question="Proceed?", choices=["yes", "no"], timeout=0.5)
            assert asked["status"] == "waiting" and asked["job_id"] == job and "answer" not in asked
            question_id = asked["question_id"]
            assert f"question_id={question_id!r}" in asked["next"] and "ask_person again" in asked["next"]
            state = await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] == "waiting")
            assert state["question"] == "Proceed?" and state["choices"] == ["yes", "no"]

            again = await call(inside, "ask_person", question="Proceed?", question_id=question_id, timeout=0.5)
            assert again["status"] == "waiting" and again["question_id"] == question_id
            assert "has no question 'nope'" in await refused(
                inside, "ask_person", question="Proceed?", question_id="nope", timeout=0.5
            )

            answered = await run(
                mam("answer", job[-6:], "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert answered.returncode == 0, answered.stderr
            got = await call(inside, "ask_person", question="Proceed?", question_id=question_id, timeout=20)
            assert got == {"job_id": job, "question_id": question_id, "status": "answered", "answer": "yes"}

            # A call already waiting when the answer comes returns it at once.
            second: dict[str, Any] = {}
            asked = await call(inside, "ask_person", question="Which?", timeout=0.5)

            async def wait() -> None:
                second.update(
                    await call(inside, "ask_person", question="Which?", question_id=asked["question_id"], timeout=30)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                done = await call(inside, "answer_job", job=job, answer="the second")
                assert done["status"] == "running" and nulls(done) == []
            assert second["answer"] == "the second"
            assert (await call(inside, "get_job", job=job))["status"] == "running"
