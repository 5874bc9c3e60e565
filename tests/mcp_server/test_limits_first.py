"""Limits before work: a list argument over its limit is refused at once, naming the limit, before
any lookup in the registry or any connection (MCP through the official SDK client, CLI as a process)."""

from __future__ import annotations

from mcp_support import mcp_session, refused

from mam.contract.arg_limits import MOST_EVENT_TYPES

from support import mam, run
from workspace_support import WorkspacePaths

DEAD_BROKER = "mqtt://127.0.0.1:9"


async def test_mcp_submit_job_refuses_10000_after_items_at_once_naming_the_limit(ws: WorkspacePaths) -> None:
    async with mcp_session(ws) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        after = tools["submit_job"].input_schema["properties"]["after"]
        assert [branch.get("maxItems") for branch in after["anyOf"]] == [64, None], after  # a list, or null
        text = await refused(session, "submit_job", prompt="p", agent="a", after=[f"job-{n}" for n in range(10_000)])
        assert "after: 10000 jobs given; the limit is 64" in text, text
        labels = {f"k{n}": "v" for n in range(65)}
        assert "labels: 65 labels given; the limit is 64" in await refused(
            session, "submit_job", prompt="p", agent="a", labels=labels
        )
        assert "labels: 65 labels given; the limit is 64" in await refused(session, "list_jobs", labels=labels)
        assert "status: 12 statuses given; the limit is 11" in await refused(
            session, "list_jobs", status=["running"] * 12
        )
        # The new tools' lists: refused by count before the job is looked up (no such job, no broker here).
        assert tools["ask_person"].input_schema["properties"]["choices"]["maxItems"] == 32
        assert tools["job_events"].input_schema["properties"]["types"]["maxItems"] == MOST_EVENT_TYPES
        assert "choices: 33 choices given; the limit is 32" in await refused(
            session, "ask_person", question="q", job="nope", choices=[f"c{n}" for n in range(33)]
        )
        assert f"types: {MOST_EVENT_TYPES + 1} types given; the limit is {MOST_EVENT_TYPES}" in await refused(
            session, "job_events", job="nope", types=["output"] * (MOST_EVENT_TYPES + 1)
        )


async def test_cli_list_arguments_over_their_limit_exit_2_before_connecting(ws: WorkspacePaths) -> None:
    after = ",".join(f"job-{n}" for n in range(65))
    submit = await run(
        mam(
            "submit",
            "--prompt",
            "p",
            "--agent",
            "a",
            "--after",
            after,
            "--workspace",
            str(ws.root),
            "--broker",
            DEAD_BROKER,
        ),
        cwd=ws.elsewhere,
    )
    assert submit.returncode == 2, submit.stderr
    assert b"--after" in submit.stderr and b"64" in submit.stderr and len(submit.stderr.splitlines()) == 1
    labels = [arg for n in range(65) for arg in ("--label", f"k{n}=v")]
    jobs = await run(mam("jobs", *labels, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert jobs.returncode == 2, jobs.stderr
    assert jobs.stderr.strip() == b"mam: error: --label: 65 labels given; the limit is 64", jobs.stderr
