"""Starting agents: a job that cannot start fails with the reason and the queue goes on;
a runner whose command is not installed refuses to start."""

from __future__ import annotations

import sys

import pytest
from runner_support import MOCK, TERMINAL, agent_runner, log_events, mock_command, submit

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, DEAD_BROKER, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_a_job_that_cannot_start_fails_with_the_reason_and_the_queue_goes_on(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    """The command names a program per job (`{job_id}` in argv[0]): one is missing, one is not
    executable, one runs. With --concurrency 1 and all three queued before the runner starts,
    whichever order it takes them in, a start failure comes before another queued job."""
    programs = ws.root.parent / "bin"
    programs.mkdir()
    script = f"#!/bin/sh\nexec {sys.executable} {MOCK}\n"
    (programs / "job-runs").write_text(script)
    (programs / "job-runs").chmod(0o755)
    (programs / "job-noexec").write_text(script)
    (programs / "job-noexec").chmod(0o644)
    ws_id = workspace_id(ws.root)
    jobs = ["job-missing", "job-noexec", "job-runs"]
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        for job in jobs:
            await submit(amqtt.url, ws, job, "echo")
        # -v in the middle of the command line: debug lines (the claims being sent) appear.
        async with agent_runner(amqtt.url, ws, "--command", f"{programs}/{{job_id}}", "-v", "--concurrency", "1") as r:
            records = {
                job: await wait_for_state(amqtt.url, ws_id, job, lambda rec: rec["status"] in TERMINAL, timeout=30)
                for job in jobs
            }
    missing, noexec, runs = (records[job] for job in jobs)
    assert missing["status"] == "failed" and missing["exit_code"] is None
    assert missing["error"] == f"cannot start '{programs}/job-missing': No such file or directory"
    assert (
        noexec["status"] == "failed" and noexec["error"] == f"cannot start '{programs}/job-noexec': Permission denied"
    )
    assert runs["status"] == "succeeded" and "prompt=echo" in runs["result"]
    log = r.output()
    assert log.count("start failed: cannot start") == 2 and "job job-runs: exited with code 0" in log
    assert "claiming it at version" in log, "-v anywhere turns on debug logging"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--agent", "claude-code"],
            "--agent claude-code: command 'claude' is not on PATH; install Claude Code 2.1.197 (npm install -g "
            "@anthropic-ai/claude-code@2.1.197), or pass --command/--profile",
        ),
        (
            ["-v", "--profile", "codex", "--agent", "x"],
            "--profile codex: command 'codex' is not on PATH; install Codex CLI 0.171.0 (npm install -g "
            "@openai/codex@0.171.0), or pass --command/--profile",
        ),
        (
            ["--agent", "x", "--command", "no-such-tool --flag", "-v"],
            "--command: command 'no-such-tool' is not on PATH; install it, or pass --command/--profile",
        ),
        (
            ["--agent", "x", "--command", "./tools/agent"],
            "--command: command './tools/agent' is not an executable file; fix the path, or pass --command/--profile",
        ),
    ],
)
async def test_runner_refuses_to_start_when_its_command_is_not_installed(
    args: list[str], message: str, ws: WorkspacePaths
) -> None:
    empty = ws.root.parent / "empty-path"
    empty.mkdir()
    result = await run(
        [str(BIN / "mam-agent"), "--workspace", str(ws.root), "--broker", DEAD_BROKER, *args],
        cwd=ws.elsewhere,
        env=child_env(PATH=str(empty)),
    )
    assert result.returncode == 2
    assert result.stderr.decode() == f"mam-agent: error: {message}\n"


async def test_a_relative_command_is_found_from_the_workspace_root(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    tools = ws.root / "tools"
    tools.mkdir()
    (tools / "agent").write_text(f"#!/bin/sh\nexec {sys.executable} {MOCK}\n")
    (tools / "agent").chmod(0o755)
    ws_id = workspace_id(ws.root)
    async with (
        projector_process(amqtt, ws.root, ws.elsewhere),
        agent_runner(amqtt.url, ws, "--command", "./tools/agent"),
    ):
        await submit(amqtt.url, ws, "job-rel", "echo")
        record = await wait_for_state(amqtt.url, ws_id, "job-rel", lambda r: r["status"] in TERMINAL, timeout=30)
    assert record["status"] == "succeeded", record


async def test_a_prompt_too_long_for_an_environment_variable_still_reaches_the_agent_on_stdin(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    prompt = "echo " + "x" * 200_000  # Linux refuses to exec with an environment string over 128 KiB
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), agent_runner(amqtt.url, ws, *mock_command()) as r:
        submitted = await run(
            mam(
                "submit",
                "--prompt",
                "-",
                "--agent",
                "mock",
                "--job-id",
                "job-long",
                "--wait",
                "--broker",
                amqtt.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
            input=prompt.encode(),
        )
        assert submitted.returncode == 0, submitted.stderr
        record = await wait_for_state(amqtt.url, ws_id, "job-long", lambda rec: rec["status"] in TERMINAL, timeout=30)
    assert record["status"] == "succeeded", record
    text = "".join(e["text"] for e in log_events(ws, "job-long") if e["type"] == "output")
    assert f"prompt={prompt}\n" in text and "env_prompt= job=job-long" in text
    assert "too long for MAM_PROMPT" in r.output()
