"""Clients that follow a job ride out a restart of `mam up`, and of a broker under `mam-projector`:
`mam wait` and `mam logs -f` exit with the job's outcome, every line printed once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from fleet_support import shell_runner
from restart_support import TICKING, Command, ticks_once
from test_runner_support import submit

from brokers import BROKERS, free_port
from conftest import WorkspacePaths
from e2e import projector_process, up_process

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
async def test_wait_and_logs_follow_ride_out_a_restart_with_every_line_once(
    kind: str, ws: WorkspacePaths, tmp_path: Path
) -> None:
    async with served(kind, ws, tmp_path) as (url, (down, up)), shell_runner(url, ws, "r1"):
        where = ("--broker", url, "--workspace", str(ws.root))
        await submit(url, ws, "job-tick", TICKING, agent="shell")
        logs = Command("logs", "logs", "-f", "job-tick", *where, cwd=ws.elsewhere, logs=tmp_path)
        wait = Command("wait", "wait", "job-tick", *where, cwd=ws.elsewhere, logs=tmp_path)
        try:
            await logs.said("tick 3", on="stdout")
            await down()
            await logs.said("mam: lost the broker at ")
            await wait.said("mam: lost the broker at ")
            await up()
            assert await logs.wait() == 0, logs.stderr()
            assert await wait.wait() == 0, wait.stderr()
        finally:
            logs.stop()
            wait.stop()
    ticks_once(logs.stdout())
    assert logs.stderr().count("lost the broker") == 1, logs.stderr()
    assert f"mam: reconnected to {url}" in logs.stderr()
    assert "mam: job job-tick succeeded" in logs.stderr()
    assert wait.stdout() == "job-tick succeeded (exit code 0)\n", wait.stderr()
    assert "Traceback" not in logs.stderr() + wait.stderr()
