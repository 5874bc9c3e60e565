"""`mam submit` and `mam cancel` return only with the projector's verdict (or say there was none).

Exit codes: 0 recorded, 1 refused (the reason on stderr), 2 usage, 3 no projector
or no verdict in time. `--no-wait` returns on the broker's acknowledgement but
still publishes nothing when no projector serves the workspace.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest

from brokers import RunningBroker
from e2e import event, projector_process, workspace_id
from support import Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


@dataclass
class Background:
    """A command running while the test goes on; `await result()` to join it."""

    done: bool = False
    value: subprocess.CompletedProcess[bytes] | None = None
    finished: anyio.Event = field(default_factory=anyio.Event)

    async def result(self, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
        with anyio.fail_after(timeout):
            await self.finished.wait()
        assert self.value is not None
        return self.value


@asynccontextmanager
async def background(command: Awaitable[subprocess.CompletedProcess[bytes]]) -> AsyncIterator[Background]:
    task = Background()

    async def go() -> None:
        task.value = await command
        task.done = True
        task.finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        yield task


def _cli(broker: RunningBroker, ws: WorkspacePaths, *args: str) -> list[str]:
    return mam(*args, "--broker", broker.url, "--workspace", str(ws.root))


async def _submit(
    broker: RunningBroker, ws: WorkspacePaths, job_id: str, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    return await run(
        _cli(broker, ws, "submit", "--prompt", "p", "--agent", "a", "--job-id", job_id, *extra), cwd=ws.elsewhere
    )


def _one_line_error(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


@pytest.mark.parametrize("form", [(), ("--wait",)])
async def test_submit_returns_once_recorded_and_refuses_a_duplicate_id(
    amqtt: RunningBroker, ws: WorkspacePaths, form: tuple[str, ...]
) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        first = await _submit(amqtt, ws, "job-1", *form)
        assert first.returncode == 0, first.stderr
        assert first.stdout.decode().strip() == "job-1"
        # Returned only once recorded: the record is on disk when the command exits.
        assert json.loads((ws.jobs / "job-1.json").read_bytes())["prompt"] == "p"

        duplicate = await run(
            _cli(amqtt, ws, "submit", "--prompt", "other", "--agent", "a", "--job-id", "job-1", *form),
            cwd=ws.elsewhere,
        )
        assert duplicate.returncode == 1
        assert "already submitted" in _one_line_error(duplicate.stderr)
        assert json.loads((ws.jobs / "job-1.json").read_bytes())["prompt"] == "p", "the first job is unchanged"


async def test_submit_json_prints_the_recorded_state(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        result = await _submit(amqtt, ws, "job-j", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads((ws.jobs / "job-j.json").read_bytes())


async def test_cancel_of_unknown_and_finished_jobs_is_refused_with_the_reason(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        unknown = await run(_cli(amqtt, ws, "cancel", "nope"), cwd=ws.elsewhere)
        assert unknown.returncode == 1
        assert "no job 'nope'" in _one_line_error(unknown.stderr)

        assert (await _submit(amqtt, ws, "job-c")).returncode == 0
        cancelled = await run(_cli(amqtt, ws, "cancel", "job-c", "--reason", "not needed"), cwd=ws.elsewhere)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.decode().split() == ["job-c", "cancelled"]

        again = await run(_cli(amqtt, ws, "cancel", "job-c", "--json"), cwd=ws.elsewhere)
        assert again.returncode == 1
        assert "is cancelled; a finished job never changes" in _one_line_error(again.stderr)
        assert not again.stdout
    assert json.loads((ws.jobs / "job-c.json").read_bytes())["cancel_reason"] == "not needed"


async def test_cancel_wait_waits_until_the_job_has_ended(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    """A claimed job is cancelled by its runner; `--wait` returns only with the final status."""
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        assert (await _submit(amqtt, ws, "job-w")).returncode == 0
        topic = f"mam/{workspace_id(ws.root)}/jobs/job-w"
        async with Watch(amqtt.url, f"{topic}/state") as state:
            await publish(amqtt.url, f"{topic}/events", event("claimed", "c1", runner="r"))
            await state.json(lambda r: r["status"] == "claimed")
            cancel_wait = run(_cli(amqtt, ws, "cancel", "job-w", "--wait", "--json"), cwd=ws.elsewhere)
            async with background(cancel_wait) as cancel:
                # The request is recorded, the job still claimed: the command must not return yet.
                await state.json(lambda r: r["cancel_requested_at"] is not None and r["status"] == "claimed")
                assert not cancel.done
                await publish(amqtt.url, f"{topic}/events", event("cancelled", "x1", reason="stopped"))
                result = await cancel.result()
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "cancelled"


async def test_cancel_wait_without_an_end_in_time_exits_3_and_says_so(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        assert (await _submit(amqtt, ws, "job-t")).returncode == 0
        await publish(amqtt.url, f"mam/{workspace_id(ws.root)}/jobs/job-t/events", event("claimed", "c1", runner="r"))
        result = await run(_cli(amqtt, ws, "cancel", "job-t", "--wait", "--timeout", "1"), cwd=ws.elsewhere)
    assert result.returncode == 3
    assert "had not ended within 1s; it is claimed" in _one_line_error(result.stderr)


@pytest.mark.parametrize(
    "command",
    [
        ("submit", "--prompt", "p", "--agent", "a", "--job-id", "job-n"),
        ("cancel", "job-n"),
        ("cancel", "job-n", "--no-wait"),
    ],
    ids=["submit", "cancel", "cancel-no-wait"],  # `submit --no-wait` publishes at once: test_submit_no_wait.py
)
async def test_no_projector_exits_3_and_publishes_nothing(
    amqtt: RunningBroker, ws: WorkspacePaths, command: tuple[str, ...]
) -> None:
    async with Watch(amqtt.url, f"mam/{workspace_id(ws.root)}/#") as everything:
        result = await run(_cli(amqtt, ws, *command), cwd=ws.elsewhere)
        assert result.returncode == 3
        assert "no projector is online" in _one_line_error(result.stderr)
        assert not result.stdout
        # Prove the negative: a marker published after the command is the first thing seen.
        marker = f"mam/{workspace_id(ws.root)}/marker"
        await publish(amqtt.url, marker, b"end")
        topic, _ = await everything.next()
        assert topic == marker, f"the command published {topic}"


async def test_no_wait_returns_on_the_brokers_ack_once_a_projector_serves(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        result = await _submit(amqtt, ws, "job-q", "--no-wait", "--json")
        assert result.returncode == 0, result.stderr
        published = json.loads(result.stdout)
        assert published["job_id"] == "job-q" and published["recorded"] is False and published["event_id"]
        record = await wait_for_state(amqtt.url, workspace_id(ws.root), "job-q")
        assert record["last_event_id"] == published["event_id"]
        cancel = await run(_cli(amqtt, ws, "cancel", "job-q", "--no-wait"), cwd=ws.elsewhere)
        assert cancel.returncode == 0 and cancel.stdout.decode().strip() == "job-q"
        await wait_for_state(amqtt.url, workspace_id(ws.root), "job-q", lambda r: r["status"] == "cancelled")


@pytest.mark.parametrize(
    "args, named",
    [
        (("--timeout", "0"), "--timeout: '0'"),
        (("--timeout", "-3"), "--timeout: '-3'"),
        (("--job-timeout", "abc"), "--job-timeout: 'abc'"),
        (("--agent", "bad agent!"), "--agent: 'bad agent!' may contain only letters, digits, '.', '_' and '-'"),
        (("--no-wait", "--follow"), "--follow"),
        (("--no-wait", "--wait"), "--wait"),
    ],
)
async def test_bad_flag_values_are_one_line_usage_errors_naming_the_flag(
    ws: WorkspacePaths, args: tuple[str, ...], named: str
) -> None:
    result = await run(
        mam("submit", "--prompt", "p", "--agent", "a", "--workspace", str(ws.root), *args), cwd=ws.elsewhere
    )
    assert result.returncode == 2
    assert named in _one_line_error(result.stderr)


async def test_no_verdict_in_time_says_check_before_resubmitting_never_unreachable(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """A projector that is online but too slow to answer (here: stopped) gets an honest exit 3."""
    import os
    import signal

    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        os.kill(projector.pid, signal.SIGSTOP)
        try:
            result = await _submit(mosquitto, ws, "job-slow", "--timeout", "1")
        finally:
            os.kill(projector.pid, signal.SIGCONT)
        assert result.returncode == 3
        err = _one_line_error(result.stderr)
        assert "no verdict" in err and "check `mam show job-slow` before resubmitting" in err
        assert "cannot reach" not in err
        # It was published: once the projector runs again, the job is recorded.
        await wait_for_state(mosquitto.url, workspace_id(ws.root), "job-slow")
