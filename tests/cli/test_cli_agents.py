"""`mam agents` from the runners' retained statuses; the submit warning; followers say what they wait for."""

from __future__ import annotations

import json
import signal
import subprocess

import anyio
from runner_support import agent_runner, mock_command
from watch_support import watching

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def _agents(url: str, ws: WorkspacePaths, *flags: str) -> list[dict]:
    result = await run(mam("agents", "--json", "--broker", url, "--workspace", str(ws.root), *flags), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


async def test_agents_lists_an_online_runner_and_its_jobs_then_offline_after_kill_9(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    url, root = mosquitto.url, str(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        async with agent_runner(url, ws, *mock_command(), name="r1") as runner:
            submitted = await run(
                mam(
                    "submit",
                    "--prompt",
                    "hang",
                    "--agent",
                    "mock",
                    "--job-id",
                    "job-h",
                    "--broker",
                    url,
                    "--workspace",
                    root,
                ),
                cwd=ws.elsewhere,
            )
            assert submitted.returncode == 0, submitted.stderr
            assert b"no runner" not in submitted.stderr, "a runner serves mock: no warning"
            await wait_for_state(url, workspace_id(ws.root), "job-h", lambda r: r["status"] == "running")
            status = f"mam/{workspace_id(ws.root)}/agents/r1/status"
            async with (
                Watch(url, status) as watch,
                watching(ws.elsewhere, "agents", "--watch", "--json", "--broker", url, "--workspace", root) as live,
            ):
                await watch.json(lambda s: s["jobs"] == ["job-h"])
                await live.record(lambda s: s["agent_id"] == "r1" and s["jobs"] == ["job-h"])
                [listed] = await _agents(url, ws)
                assert (listed["agent_id"], listed["agent"], listed["status"]) == ("r1", "mock", "online")
                assert listed["jobs"] == ["job-h"] and listed["pid"] == runner.pid
                table = await run(mam("agents", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
                header, row = table.stdout.decode().splitlines()
                assert header.split() == ["AGENT", "RUNNER", "HOST", "STATUS", "SINCE", "SLOTS", "JOBS"]
                assert row.split()[:2] == ["mock", "r1"] and " online " in row and row.split()[-2:] == ["1/1", "job-h"]

                runner.kill9()
                await watch.json(lambda s: s["status"] == "offline")
                offline = await live.record(lambda s: s["status"] == "offline")
                assert offline["agent_id"] == "r1", "--watch shows the will as it comes"
                assert await live.interrupt() == 0
            [gone] = await _agents(url, ws)
            assert (gone["agent_id"], gone["status"]) == ("r1", "offline"), "shown: offline for less than a day"


async def test_submit_warns_on_stderr_when_no_runner_serves_the_agent(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        result = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "codex",
                "--job-id",
                "job-w",
                "--broker",
                amqtt.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert await _agents(amqtt.url, ws) == []
    assert result.returncode == 0 and result.stdout.decode().strip() == "job-w", "recorded all the same"
    err = result.stderr.decode()
    assert "warning: no runner for 'codex' is online" in err and "mam-agent --agent codex" in err
    assert err.count("\n") == 1, err
    assert (ws.jobs / "job-w.json").exists()


async def _stderr_until(proc: anyio.abc.Process, text: str, timeout: float = 15) -> str:
    assert proc.stderr is not None
    seen = b""
    with anyio.fail_after(timeout):
        while text.encode() not in seen:
            seen += await proc.stderr.receive()
    return seen.decode()


async def _interrupted(proc: anyio.abc.Process) -> str:
    assert proc.stderr is not None
    proc.send_signal(signal.SIGINT)
    rest = b""
    with anyio.fail_after(10):
        async for chunk in proc.stderr:
            rest += chunk
        assert await proc.wait() == 130
    return rest.decode()


async def test_followers_say_what_they_wait_for_and_how_to_resume_after_ctrl_c(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    where = ("--broker", amqtt.url, "--workspace", str(ws.root))
    waits = "queued: no runner for 'nobody' is online"
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        submit = mam("submit", "--prompt", "p", "--agent", "nobody", "--job-id", "job-q", "--follow", *where)
        async with await anyio.open_process(submit, cwd=ws.elsewhere, env=child_env(), stderr=subprocess.PIPE) as proc:
            await _stderr_until(proc, waits)
            said = await _interrupted(proc)
        assert "job job-q keeps running: `mam logs -f job-q` follows it again" in said
        logs = mam("logs", "-f", "q", *where)  # by its id's unique suffix
        async with await anyio.open_process(logs, cwd=ws.elsewhere, env=child_env(), stderr=subprocess.PIPE) as proc:
            await _stderr_until(proc, waits)
            said = await _interrupted(proc)
        assert "`mam logs -f job-q` follows it again" in said and "Traceback" not in said
