"""`mam agents` SINCE means one thing for every runner, with real runners (`mam-agent`) on mosquitto: when
its current status began. An online runner is online since it came online (`online_since`, which its
republishes as its jobs change leave alone); one stopped is offline since it stopped; one killed is offline
by its will, which cannot say when: `-`, never the time it came online (issue 43, part 5)."""

from __future__ import annotations

import json

from runner_support import agent_runner, mock_command

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def _agents(url: str, ws: WorkspacePaths, *flags: str) -> tuple[str, str]:
    result = await run(mam("agents", "--broker", url, "--workspace", str(ws.root), *flags), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stderr
    return result.stdout.decode(), result.stderr.decode()


def _since(table: str, runner: str) -> str:
    """The first word of `runner`'s SINCE cell: `-`, `just` (now) or an age (`3s`)."""
    header, *rows = table.splitlines()
    at = header.split().index("SINCE")
    [row] = [row.split() for row in rows if row.split()[1] == runner]
    return row[at]


async def test_since_is_when_the_status_began_for_online_stopped_and_killed_runners(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    url, ws_id = mosquitto.url, workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        async with agent_runner(url, ws, *mock_command(), name="stops"):
            pass  # stopped by SIGTERM: it says offline itself
        async with (
            Watch(url, f"mam/{ws_id}/agents/r1/status") as status,
            agent_runner(url, ws, *mock_command(), name="r1") as runner,
        ):
            online = await status.json(lambda s: s["status"] == "online")
            came = online["online_since"]
            assert came and "will" not in online, online
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
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            assert submitted.returncode == 0, submitted.stderr
            await wait_for_state(url, ws_id, "job-h", lambda r: r["status"] == "running")
            busy = await status.json(lambda s: s["jobs"] == ["job-h"])
            assert busy["online_since"] == came, "a republish (its jobs changed) does not move SINCE"
            assert busy["updated_at"] >= came

            out, _ = await _agents(url, ws, "-o", "json")
            [listed] = [s for s in json.loads(out) if s["agent_id"] == "r1"]
            assert listed["online_since"] == came

            runner.kill9()
            will = await status.json(lambda s: s["status"] == "offline")
        assert will["will"] is True and will["online_since"] == came, will
        table, _ = await _agents(url, ws)
        assert _since(table, "r1") == "-", table  # not when it came online: the will cannot say when it went
        assert _since(table, "stops") != "-", table  # it said when it stopped
        out, _ = await _agents(url, ws, "-o", "json")
        stopped = next(s for s in json.loads(out) if s["agent_id"] == "stops")
        assert stopped["status"] == "offline" and "will" not in stopped, stopped
        assert stopped["updated_at"] > stopped["online_since"], "offline since it stopped, after it came online"
