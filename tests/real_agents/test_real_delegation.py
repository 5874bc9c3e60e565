"""A real agent CLI delegates through mam at its profile's default level, with no registration by hand.

The runner gives each job's agent mam's own MCP server for that job (agents/job_mcp.py): Claude Code through a
per-job `--mcp-config`, Codex through `-c mcp_servers.mam.*`, Gemini CLI through a per-job home's settings. The
scripted model calls mam's tools on its very first turn (no "still connecting"), at `edit` (no approval asked),
and what it submits is the job's child (`MAM_JOB_ID` reached the server, through Codex's filtered environment
too). A `shell` runner takes the children.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from agent_clis import CLIS
from agent_edits_support import write_turns
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_rig, real_runner
from runner_support import agent_runner
from worktrees_support import git, make_repo

from e2e import up_with_flags, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

CLIS_ORCHESTRATED = ("claude-code", "codex", "gemini")
ENDED = ("succeeded", "failed", "cancelled", "timed_out", "lost")

TOOLS = {"claude-code": "mcp__mam__", "codex": "mcp__mam__", "gemini": "mcp_mam_"}
"""How each CLI names mam's tools to its model: Claude Code `mcp__SERVER__TOOL`, Codex a Responses namespace
`mcp__SERVER` holding `TOOL` (the model server joins them), Gemini CLI `mcp_SERVER_TOOL`."""
REFUSALS = ("still connecting", "requires approval", "haven't granted", "Error executing tool", "not allowed")
"""What each CLI tells its model when a tool call was not run (the issue's measured refusals)."""


def read_record(ws: WorkspacePaths, job_id: str) -> dict:
    return json.loads((ws.jobs / f"{job_id}.json").read_text())


async def submit_and_wait(
    url: str, ws: WorkspacePaths, job_id: str, prompt: str, agent: str, timeout: float = 3 * JOB_TIMEOUT
) -> dict:
    """`mam submit` a job and wait until it has ended; its record."""
    done = await run(
        mam(
            "submit",
            "--prompt",
            prompt,
            "--agent",
            agent,
            "--job-id",
            job_id,
            "--broker",
            url,
            "--workspace",
            str(ws.root),
        ),
        cwd=ws.elsewhere,
    )
    assert done.returncode == 0, done.stderr
    await wait_for_state(url, workspace_id(ws.root), job_id, lambda r: r["status"] in ENDED, timeout=timeout)
    return read_record(ws, job_id)


def delegating_turns(agent: str, child: str) -> list[Turn]:
    """Submit a `shell` child on the first turn, wait for it, answer."""
    tool = TOOLS[agent]
    return [
        Turn(
            tool=f"{tool}submit_job",
            args={"agent": "shell", "prompt": f"echo {child} says hi", "job_id": child, "wait": False},
        ),
        Turn(tool=f"{tool}wait_job", args={"job": child, "timeout": 45}),
        Turn(text="the child answered"),
    ]


def tool_results(script: Script) -> str:
    """The tool results the CLI sent its model, in each API's shape: Anthropic's `tool_result` blocks, the
    Responses API's `function_call_output` items, Gemini's `functionResponse` parts."""
    found: list[object] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("tool_result", "function_call_output") or "functionResponse" in node:
                found.append(node)
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk([{k: v for k, v in r.items() if not k.startswith("_")} for r in script.requests])
    return json.dumps(found)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_job_at_the_default_level_delegates_over_mam_s_own_mcp_server_on_its_first_turn(
    agent: str, ws: WorkspacePaths
) -> None:
    child = f"child-of-{agent}"
    script = Script(delegating_turns(agent, child))
    # the jobs reach the broker the runner was given (the suite's runners otherwise point jobs at a dead one)
    async with real_rig(CLIS[agent], ws, script, env={"MAM_BROKER_URL": None}) as rig:
        async with agent_runner(rig.url, ws, agent="shell", name="shell-1", env=child_env(MAM_BROKER_URL=None)):
            parent = await rig.job("job-parent", "delegate a greeting", agent=agent)
            logs = await rig.mam("logs", "job-parent")
    said = tool_results(script)
    declared = [[t.get("name") for t in r.get("tools") or [] if isinstance(t, dict)] for r in script.requests]
    mcp_lines = [line for line in logs.splitlines() if "mcp" in line.lower()][-8:]
    assert (ws.jobs / f"{child}.json").is_file(), (said[-1000:], [d[-6:] for d in declared], mcp_lines)
    kid = json.loads((ws.jobs / f"{child}.json").read_text())
    assert parent["status"] == "succeeded" and parent["result"] == "the child answered", parent.get("error")
    assert kid["parent"] == "job-parent", kid  # MAM_JOB_ID reached `mam mcp`
    assert kid["status"] == "succeeded", kid
    assert f"{child} says hi" in said, "wait_job's answer (the child's output) reached the model"
    assert not [r for r in REFUSALS if r in said], said[:2000]
    assert not (ws.root / ".mcp.json").exists() and not (ws.root / ".gemini").exists()  # nothing in the checkout


def orchestrating_turns(agent: str, kids: dict[str, str]) -> list[Turn]:
    """Delegate one job to each of `kids` (agent -> job id), wait for each, land each in this job's branch."""
    tool = TOOLS[agent]
    submit = [
        Turn(
            tool=f"{tool}submit_job",
            args={"agent": kid_agent, "prompt": f"write from-{kid_agent}.txt", "job_id": kid, "wait": False},
        )
        for kid_agent, kid in kids.items()
    ]
    wait = [Turn(tool=f"{tool}wait_job", args={"job": kid, "timeout": 100}) for kid in kids.values()]
    land = [Turn(tool=f"{tool}land_job", args={"job": kid}) for kid in kids.values()]
    return [*submit, *wait, *land, Turn(text="gathered both")]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("orchestrator", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_each_cli_orchestrates_the_other_two_in_worktrees_and_a_person_lands_one_branch(
    orchestrator: str, ws: WorkspacePaths
) -> None:
    """The loop mam is for, at each profile's default level: the orchestrator's job delegates to the other two
    vendors' agents over MCP, waits, lands both children's branches in its own (never the checkout), and ends;
    the person then lands the one branch with `mam merge PARENT`."""
    make_repo(ws.root)
    kids = {agent: f"kid-{agent}" for agent in CLIS_ORCHESTRATED if agent != orchestrator}
    scripts = {orchestrator: Script(orchestrating_turns(orchestrator, kids))}
    scripts |= {agent: Script(write_turns(agent, f"from-{agent}.txt")) for agent in kids}
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        async with AsyncExitStack() as runners:
            for agent, script in scripts.items():
                await runners.enter_async_context(
                    real_runner(CLIS[agent], url, ws, script, "--worktree", env={"MAM_BROKER_URL": None})
                )
            head = git(ws.root, "rev-parse", "HEAD")
            parent = await submit_and_wait(url, ws, "job-parent", "delegate and gather", orchestrator)
            said = tool_results(scripts[orchestrator])
            assert parent["status"] == "succeeded" and parent["result"] == "gathered both", (
                parent.get("error"),
                said[-2500:],
            )
            children = {agent: read_record(ws, kid) for agent, kid in kids.items()}
            assert git(ws.root, "rev-parse", "HEAD") == head  # the children landed in the parent's branch only
            assert not [p for p in ws.root.glob("from-*.txt")]
            merged = await run(mam("merge", "job-parent", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    for kid in children.values():
        assert kid["status"] == "succeeded" and kid["parent"] == "job-parent", kid
    assert not [r for r in REFUSALS if r in said], said[-2000:]
    assert merged.returncode == 0, merged.stderr
    for agent in kids:
        assert (ws.root / f"from-{agent}.txt").read_text() == f"from-{agent}.txt\n"


def register_by_hand(agent: str, home: Path, mam_path: str) -> None:
    """The user's own registrations, as the README shows them for an agent they run themselves: `mam` (`mam mcp`,
    found on PATH) and another server, `other` (another mam, trusted where Gemini CLI would not offer it else)."""
    mine = {"command": "mam", "args": ["mcp"]}
    other = {"command": mam_path, "args": ["mcp"]}
    match agent:
        case "claude-code":
            (home / ".claude.json").write_text(json.dumps({"mcpServers": {"mam": mine, "other": other}}))
        case "codex":
            with (home / ".codex" / "config.toml").open("a") as config:
                config.write(
                    '\n[mcp_servers.mam]\ncommand = "mam"\nargs = ["mcp"]\n\n'
                    f'[mcp_servers.other]\ncommand = "{mam_path}"\nargs = ["mcp"]\n'
                    '[mcp_servers.other.tools.list_agents]\napproval_mode = "approve"\n'
                )
        case "gemini":
            path = home / ".gemini" / "settings.json"
            servers = {"mam": mine, "other": other | {"trust": True}}
            path.write_text(json.dumps(json.loads(path.read_text()) | {"mcpServers": servers}))


def declared_names(script: Script) -> set[str]:
    """Every tool name the CLI declared to its model (a namespace's tools as NAMESPACE__TOOL)."""
    names: set[str] = set()
    for request in script.requests:
        for tool in request.get("tools") or []:
            for declared in tool.get("functionDeclarations") or [tool]:
                names.add(str(declared.get("name")))
                names |= {f"{declared.get('name')}__{inner.get('name')}" for inner in declared.get("tools") or []}
    return names


@pytest.mark.timeout(240)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_user_s_own_registration_of_mam_and_other_servers_keeps_working_beside_the_job_s(
    agent: str, ws: WorkspacePaths
) -> None:
    """A user who registered `mam` by hand (as the README shows for an agent they run themselves) and other servers:
    the job still delegates as its own (the child's parent is the job), and the user's other servers are still
    offered. (Codex's overrides and Gemini CLI's merged settings replace a `mam` of the user's inside the job; Claude
    Code keeps a user-scope `mam` of its own, which inherits the job's variables: docs/agents.md.)"""
    child = f"child-of-{agent}"
    script = Script(delegating_turns(agent, child))
    async with real_rig(CLIS[agent], ws, script, env={"MAM_BROKER_URL": None}) as rig:
        register_by_hand(agent, rig.home, str(BIN / "mam"))
        async with agent_runner(rig.url, ws, agent="shell", name="shell-1", env=child_env(MAM_BROKER_URL=None)):
            parent = await rig.job("job-parent", "delegate a greeting", agent=agent)
    assert parent["status"] == "succeeded", parent.get("error")
    assert read_record(ws, child)["parent"] == "job-parent"
    assert f"{TOOLS[agent]}list_agents".replace("mam", "other") in declared_names(script)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_parent_that_ends_leaves_no_child_running_unless_it_abandons_it_and_its_tree_cancels_after(
    agent: str, ws: WorkspacePaths
) -> None:
    """The CLI's job delegates two long children without waiting and ends. Its default `parent_close: cancel` ends
    the one it did not abandon; `mam cancel --tree PARENT` of the finished parent then ends the other (before:
    refused, 'a finished job never changes', and the child ran on until its runner's idle timeout)."""
    tool = TOOLS[agent]
    long = "echo started; sleep 600"
    script = Script(
        [
            Turn(
                tool=f"{tool}submit_job",
                args={
                    "agent": "shell",
                    "prompt": long,
                    "job_id": "kid-abandoned",
                    "parent_close": "abandon",
                    "wait": False,
                },
            ),
            Turn(
                tool=f"{tool}submit_job",
                args={"agent": "shell", "prompt": long, "job_id": "kid-default", "wait": False},
            ),
            Turn(text="left them running"),
        ]
    )
    ws_id = workspace_id(ws.root)
    async with real_rig(CLIS[agent], ws, script, env={"MAM_BROKER_URL": None}) as rig:
        async with agent_runner(
            rig.url, ws, "--concurrency", "2", agent="shell", name="shell-1", env=child_env(MAM_BROKER_URL=None)
        ):
            parent = await rig.job("job-parent", "delegate and go", agent=agent)
            defaulted = await wait_for_state(rig.url, ws_id, "kid-default", lambda r: r["status"] in ENDED, timeout=30)
            abandoned = await wait_for_state(
                rig.url, ws_id, "kid-abandoned", lambda r: r["status"] == "running", timeout=30
            )
            cancelled = await run(
                mam("cancel", "--tree", "job-parent", "--broker", rig.url, "--workspace", str(ws.root)),
                cwd=ws.elsewhere,
            )
            after = await wait_for_state(rig.url, ws_id, "kid-abandoned", lambda r: r["status"] in ENDED, timeout=30)
    assert parent["status"] == "succeeded", (parent.get("error"), tool_results(script)[-1500:])
    assert defaulted["status"] == "cancelled" and "parent_close: cancel" in defaulted["cancel_reason"], defaulted
    assert abandoned["parent"] == "job-parent"
    assert cancelled.returncode == 0, cancelled.stderr
    assert after["status"] == "cancelled", after
    assert read_record(ws, "job-parent")["status"] == "succeeded"  # the finished parent stays as recorded
