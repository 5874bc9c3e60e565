"""Clients that follow a job ride out a restart of `mam up`, and of a broker under `mam-projector`:
`mam wait` and `mam logs -f` exit with the job's outcome, every line printed once."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from fleet_support import shell_runner
from restart_support import Command, ticking, ticks_once
from runner_support import agent_runner, submit

from brokers import BROKERS, free_port
from e2e import projector_process, up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


def _outcome(stderr: str) -> str:
    """The outcome line a follower ended with on stderr (`mam: job ID STATUS ...`), without `mam: `."""
    [line] = [line for line in stderr.splitlines() if line.startswith("mam: job ")]
    return line.removeprefix("mam: ")


Restart = tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]
"""Take the service down; bring it back on the same port."""


@asynccontextmanager
async def served(kind: str, ws: WorkspacePaths, tmp_path: Path) -> AsyncIterator[tuple[str, Restart]]:
    """The workspace served by `mam up` (restarted as a whole) or by `mam-projector` on a mosquitto of
    this test's own (the broker restarted); its URL and how to restart it."""
    async with AsyncExitStack() as stack:
        if kind == "mam-up":
            port = free_port()
            current = AsyncExitStack()
            stack.push_async_callback(lambda: current.aclose())
            await current.enter_async_context(up_process(ws.root, ws.elsewhere, port))

            async def down() -> None:
                await current.aclose()

            async def up() -> None:
                await current.enter_async_context(up_process(ws.root, ws.elsewhere, port))

            yield f"mqtt://127.0.0.1:{port}", (down, up)
        else:
            broker = stack.enter_context(BROKERS["mosquitto"](tmp_path / "own-mosquitto"))
            await stack.enter_async_context(projector_process(broker, ws.root, ws.elsewhere))

            async def down() -> None:
                broker.kill()

            async def up() -> None:
                broker.restart()

            yield broker.url, (down, up)


@pytest.mark.parametrize("kind", ["mam-up", "mosquitto"])
@pytest.mark.slow
async def test_wait_and_logs_follow_ride_out_a_restart_with_every_line_once(
    kind: str, ws: WorkspacePaths, tmp_path: Path
) -> None:
    async with served(kind, ws, tmp_path) as (url, (down, up)), shell_runner(url, ws, "r1"):
        where = ("--broker", url, "--workspace", str(ws.root))
        fence = tmp_path / "restarting"
        follow = Command(
            "submit",
            "submit",
            "--agent",
            "shell",
            "--prompt",
            ticking(fence),
            "--job-id",
            "job-tick",
            "--follow",
            *where,
            cwd=ws.elsewhere,
            logs=tmp_path,
        )
        await follow.said("job-tick\n")  # recorded
        logs = Command("logs", "logs", "-f", "job-tick", *where, cwd=ws.elsewhere, logs=tmp_path)
        wait = Command("wait", "wait", "job-tick", *where, cwd=ws.elsewhere, logs=tmp_path)
        try:
            await logs.said("tick 3", on="stdout")  # printed once connected
            await wait.connected(int(url.rsplit(":", 1)[1]))
            await down()
            for command in (follow, logs, wait):
                await command.said("mam: lost the broker at ")
            fence.touch()  # the job prints its other lines while the broker is away
            await up()
            assert await follow.wait() == 0, follow.stderr()
            assert await logs.wait() == 0, logs.stderr()
            assert await wait.wait() == 0, wait.stderr()
        finally:
            for command in (follow, logs, wait):
                command.stop()
    ticks_once(follow.stdout())
    ended = _outcome(follow.stderr())
    assert re.fullmatch(r"job job-tick succeeded \(exit 0\) in \d+s", ended), follow.stderr()
    ticks_once(logs.stdout())
    assert logs.stderr().count("lost the broker") == 1, logs.stderr()
    assert f"mam: reconnected to {url}" in logs.stderr()
    assert _outcome(logs.stderr()) == ended, "the three followers end with one outcome line"
    assert wait.stdout() == f"{ended}\n", wait.stderr()
    assert "Traceback" not in logs.stderr() + wait.stderr()


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_a_question_asked_in_a_job_survives_a_mam_up_restart_and_its_answer_reaches_the_job(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Proceed?" --choice yes --choice no) || exit 9\necho "answer: $a"\n'
    async with (
        served("mam-up", ws, tmp_path) as (url, (down, up)),
        agent_runner(
            url,
            ws,
            "--profile",
            "shell",
            agent="shell",
            env=child_env(MAM_BROKER_URL=None),  # the job gets --broker
        ) as runner,
    ):
        await submit(url, ws, "job-ask", script, agent="shell")
        await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] == "waiting", timeout=30)
        await down()
        await up()
        still = await wait_for_state(url, ws_id, "job-ask")
        assert still["status"] == "waiting", still
        answered = await run(
            mam("answer", "job-ask", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        # taken once the job's runner is heard from again (projector/answer_hold.py): on a loaded machine its
        # reconnect can take longer than `mam answer`'s 10 s before it sends again, and the verdict then found
        # the job already past its answer
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout in (b"job-ask running\n", b"job-ask succeeded\n"), answered
        done = await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] in ("succeeded", "failed"), timeout=30)
    assert done["status"] == "succeeded" and done["result"] == "answer: yes\n", (done, runner.output())
    assert done["answer"] == "yes"


async def test_the_first_connection_failing_is_still_cannot_reach_exit_3(ws: WorkspacePaths) -> None:
    dead = f"mqtt://127.0.0.1:{free_port()}"
    result = await run(mam("wait", "job-x", "--broker", dead, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    err = result.stderr.decode()
    assert result.returncode == 3 and err.startswith(f"mam: error: cannot reach the MQTT broker at {dead}"), err
    assert err.count("\n") == 1 and "lost the broker" not in err, err


async def test_mcp_wait_job_rides_out_a_mam_up_restart(ws: WorkspacePaths, tmp_path: Path) -> None:
    """The official MCP SDK client's `wait_job` call, under way while `mam up` restarts, returns the job's end."""
    import anyio
    from mcp_support import call, mcp_session

    ws_id = workspace_id(ws.root)
    async with (
        served("mam-up", ws, tmp_path) as (url, (down, up)),
        shell_runner(url, ws, "r1"),
        mcp_session(ws, "--broker", url) as session,
    ):
        ended: dict = {}

        async def wait_job() -> None:
            ended.update(await call(session, "wait_job", job="job-tick", timeout=90, tail_bytes=100_000))

        fence = tmp_path / "restarting"
        await submit(url, ws, "job-tick", ticking(fence), agent="shell")
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_job)
            await wait_for_state(
                url, ws_id, "job-tick", lambda r: r["output_bytes"] >= len("tick 1\ntick 2\n"), timeout=30
            )
            await down()
            fence.touch()
            await up()
    assert ended["status"] == "succeeded", ended
    ticks_once(ended["output_tail"])


async def test_mcp_ask_person_keeps_waiting_across_a_mam_up_restart_and_gets_the_answer(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    import anyio
    from mcp_support import call, mcp_session

    async with (
        served("mam-up", ws, tmp_path) as (url, (down, up)),
        shell_runner(url, ws, "r1"),
        mcp_session(ws, "--broker", url) as session,
    ):
        await submit(url, ws, "job-q", "sleep 20", agent="shell")
        await wait_for_state(url, workspace_id(ws.root), "job-q", lambda r: r["status"] == "running", timeout=30)
        first = await call(session, "ask_person", question="Go?", job="job-q", timeout=0.5)
        assert first["status"] == "waiting", first
        answered: dict = {}

        async def keep_waiting() -> None:
            answered.update(
                await call(
                    session, "ask_person", question="Go?", job="job-q", question_id=first["question_id"], timeout=90
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_waiting)
            await down()
            await up()
            answer = await run(
                mam("answer", "job-q", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert answer.returncode == 0, answer.stderr
    assert answered == {
        "job_id": "job-q",
        "question_id": first["question_id"],
        "status": "answered",
        "answer": "yes",
    }, answered
