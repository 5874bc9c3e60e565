"""Waiting for a person: `mam ask` inside a job, `mam answer` from outside, and what waiting suspends."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import anyio
import pytest
from msgspec.structs import replace
from runner_support import agent_runner, log_events, submit
from watch_support import watching

from mam.contract import events as ev
from mam.contract.fold import Context, Refusal, apply
from mam.contract.record import JobRecord, Status
from mam.contract.timefmt import iso, utc_now
from mam.projector.liveness import Limits, on_clock

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import BIN, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

# --- the fold -------------------------------------------------------------------------------------------------

T0 = "2026-01-01T00:00:00.000Z"


def _at(seconds: float) -> str:
    return iso(datetime(2026, 1, 1) + timedelta(seconds=seconds))


def _fold(state: JobRecord | None, event: ev.AnyEvent, at: str, event_id: str) -> JobRecord | Refusal:
    return apply(state, event, Context(job_id="job-1", workspace="ws", event_id=event_id, received_at=at))


def _running() -> JobRecord:
    state: JobRecord | Refusal | None = None
    for n, event in enumerate([ev.Submitted(prompt="p", agent="a"), ev.Claimed(runner="r1"), ev.Started()]):
        state = _fold(state, event, T0, f"e{n}")
    assert isinstance(state, JobRecord)
    return state


def _asked(choices: list[str] | None = None) -> JobRecord:
    asked = _fold(_running(), ev.InputRequested(question="Proceed?", choices=choices), _at(1), "q1")
    assert isinstance(asked, JobRecord)
    return asked


@pytest.mark.fast
def test_a_question_puts_the_question_and_its_choices_in_the_record() -> None:
    asked = _asked(["yes", "no"])
    assert asked.status is Status.WAITING
    assert (asked.question, asked.choices, asked.question_id, asked.asked_at) == (
        "Proceed?",
        ["yes", "no"],
        "q1",
        _at(1),
    )


@pytest.mark.fast
def test_an_answer_returns_the_job_to_running_and_the_wait_is_counted() -> None:
    answered = _fold(_asked(), ev.InputProvided(answer="go ahead"), _at(3.5), "a1")
    assert isinstance(answered, JobRecord) and answered.status is Status.RUNNING
    assert (answered.answer, answered.resumed_at, answered.waited) == ("go ahead", _at(3.5), 2.5)
    again = _fold(answered, ev.InputRequested(question="Sure?"), _at(4), "q2")
    assert isinstance(again, JobRecord) and again.answer is not answered.answer, "a new question has no answer yet"
    withdrawn = _fold(again, ev.InputWithdrawn(question_id="q2"), _at(5), "w2")
    assert isinstance(withdrawn, JobRecord) and withdrawn.status is Status.RUNNING
    assert withdrawn.waited == 3.5, "the waits add up"
    ended = _fold(_fold(withdrawn, ev.InputRequested(question="Last?"), _at(6), "q3"), ev.Cancelled(), _at(7), "c")
    assert isinstance(ended, JobRecord) and ended.waited == 4.5, "a wait that ends with the job counts too"


@pytest.mark.fast
def test_an_answer_outside_the_choices_or_to_another_question_is_refused() -> None:
    asked = _asked(["yes", "no"])
    refused = _fold(asked, ev.InputProvided(answer="maybe"), _at(2), "a1")
    assert isinstance(refused, Refusal) and "'maybe' is not one of the choices" in refused.reason
    assert "'yes', 'no'" in refused.reason
    stale = _fold(asked, ev.InputProvided(answer="yes", question_id="q0"), _at(2), "a2")
    assert isinstance(stale, Refusal) and "names question q0" in stale.reason
    assert isinstance(_fold(asked, ev.InputProvided(answer="yes", question_id="q1"), _at(2), "a3"), JobRecord)


@pytest.mark.fast
def test_one_question_at_a_time_and_only_a_running_job_asks() -> None:
    twice = _fold(_asked(), ev.InputRequested(question="And?"), _at(2), "q2")
    assert isinstance(twice, Refusal) and "already waiting for an answer to 'Proceed?'" in twice.reason
    claimed = replace(_running(), status=Status.CLAIMED)
    early = _fold(claimed, ev.InputRequested(question="?"), _at(2), "q2")
    assert isinstance(early, Refusal) and "only when the job is running" in early.reason
    unasked = _fold(_running(), ev.InputProvided(answer="yes"), _at(2), "a1")
    assert isinstance(unasked, Refusal) and "is running, not waiting for an answer" in unasked.reason


@pytest.mark.fast
def test_a_record_that_never_asked_keeps_its_bytes() -> None:
    from mam.contract.record import encode_record

    assert b"question" not in encode_record(_running()) and b"waited" not in encode_record(_running())


@pytest.mark.fast
def test_the_projector_judges_the_lease_of_a_waiting_job_but_not_its_timeout() -> None:
    long_ago = iso(utc_now() - timedelta(minutes=10))
    record = JobRecord(
        job_id="j",
        workspace="w",
        status=Status.WAITING,
        agent="a",
        prompt="p",
        submitted_at=long_ago,
        started_at=long_ago,
        last_seen_at=long_ago,
        updated_at=long_ago,
        timeout=60,
        asked_at=long_ago,
    )
    assert [type(e).__name__ for _, e in on_clock({"j": record}, utc_now(), Limits(lease=30, timeout_grace=1))] == [
        "Lost"
    ], "its runner heartbeats while it waits: none for 10 minutes is a lost runner"
    beating = replace(record, last_seen_at=iso(utc_now() - timedelta(seconds=5)))
    assert on_clock({"j": beating}, utc_now(), Limits(lease=30, timeout_grace=1)) == [], (
        "a timeout of 60 s, 10 minutes after its start: the wait does not count"
    )
    just_now = iso(utc_now() - timedelta(seconds=5))
    resumed = replace(record, status=Status.RUNNING, resumed_at=just_now, waited=590.0)
    assert on_clock({"j": resumed}, utc_now(), Limits(lease=30, timeout_grace=1)) == [], (
        "after the answer the lease counts from it, and the timeout without the wait"
    )
    overdue = replace(resumed, waited=500.0)
    assert [type(e).__name__ for _, e in on_clock({"j": overdue}, utc_now(), Limits(lease=30, timeout_grace=1))] == [
        "TimedOut"
    ]


# --- end to end -----------------------------------------------------------------------------------------------


async def _answer(url: str, ws: WorkspacePaths, job: str, text: str) -> tuple[int, str, str]:
    result = await run(mam("answer", job, text, "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def _runner_env() -> dict[str, str]:
    """The runner's environment, handed to its jobs: no MAM_BROKER_URL of its own, so each job gets the
    runner's `--broker` as MAM_BROKER_URL."""
    return child_env(MAM_BROKER_URL=None)


async def test_a_question_asked_inside_a_job_is_answered_and_the_job_goes_on(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Proceed?" --choice yes --choice no) || exit 9\necho "answer: $a"\n'
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "2", agent="shell", env=_runner_env()),
    ):
        async with watching(ws.elsewhere, "jobs", "--watch", "--broker", url, "--workspace", str(ws.root)) as watch:
            await submit(url, ws, "job-ask", script, "--job-timeout", "2", agent="shell")
            shown = await watch.next(lambda line: " waiting " in line, timeout=30)
            when, job = shown.split()[:2]  # piped, a line starts with the change's time (mam watch --help)
            assert job == "job-ask" and when.endswith("Z") and shown.endswith("asks: Proceed?"), shown
            assert await watch.interrupt() == 0
        waiting = await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] == "waiting", timeout=30)
        assert (waiting["question"], waiting["choices"]) == ("Proceed?", ["yes", "no"])
        listed = await run(mam("jobs", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert "waiting" in listed.stdout.decode() and "asks: Proceed?" in listed.stdout.decode()

        # The runner's timeout does not run while the job waits: a job with the same timeout, started
        # after the question, is timed out first.
        await submit(url, ws, "job-clock", "sleep 30", "--job-timeout", "2", agent="shell")
        await wait_for_state(url, ws_id, "job-clock", lambda r: r["status"] == "timed_out", timeout=30)
        still = await wait_for_state(url, ws_id, "job-ask")
        assert still["status"] == "waiting", still

        code, _, err = await _answer(url, ws, "job-ask", "maybe")
        assert code == 1 and "'maybe' is not one of the choices" in err and err.count("\n") == 1, err
        code, out, err = await _answer(url, ws, "job-ask", "yes")
        assert code == 0 and out == "job-ask running\n", err
        done = await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] in ("succeeded", "failed"), timeout=30)
        code, _, err = await _answer(url, ws, "job-ask", "yes")
        assert code == 1 and "is succeeded: nothing waits for an answer any more" in err and err.count("\n") == 1, err
    assert done["status"] == "succeeded" and done["result"] == "answer: yes\n", done
    assert done["answer"] == "yes" and done["waited"] > 2
    kinds = [e["type"] for e in log_events(ws, "job-ask")]
    assert kinds.index("input_requested") < kinds.index("input_provided") < kinds.index("succeeded")
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_ask_gives_up_after_its_timeout_and_the_job_runs_on(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    script = f'{BIN}/mam ask "Anyone?" --timeout 1; echo "ask exited $?"\n'
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", env=_runner_env()),
    ):
        await submit(url, ws, "job-alone", script, agent="shell")
        done = await wait_for_state(url, ws_id, "job-alone", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["result"] == "ask exited 3\n" and done["question"] == "Anyone?" and "answer" not in done
    withdrawn = [e for e in log_events(ws, "job-alone") if e["type"] == "input_withdrawn"]
    assert len(withdrawn) == 1 and withdrawn[0]["reason"] == "no answer within 1s"


async def test_ask_outside_a_job_says_what_is_missing(ws: WorkspacePaths) -> None:
    result = await run(mam("ask", "Proceed?", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 2 and b"MAM_JOB_ID is not set" in result.stderr


async def test_a_waiting_job_is_not_timed_out_while_it_waits_but_its_lease_runs(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    """By hand: a job started after the question, with the same timeout, ends first; the waiting one,
    heartbeating as its runner does while it waits, is still waiting, and once answered its timeout counts
    again without the wait. Another waiting job whose heartbeats stopped is lost within its lease."""
    ws_id = workspace_id(ws.root)

    async def send(job: str, *events: dict) -> None:
        for event in events:
            await publish(amqtt.url, f"mam/{ws_id}/jobs/{job}/events", json.dumps(event).encode())

    async def beat() -> None:
        while True:  # the runner's heartbeat, every 0.3 s (its `--heartbeat`), while the job waits and after
            await send("job-w", {"type": "heartbeat"})
            await anyio.sleep(0.3)

    start = ({"type": "claimed", "runner": "by-hand"}, {"type": "started"})
    asked = {"type": "input_requested", "question": "Proceed?"}
    async with (
        projector_process(amqtt, ws.root, ws.elsewhere, extra=("--lease", "2", "--timeout-grace", "0.5")),
        anyio.create_task_group() as tg,
    ):
        await send("job-w", {"type": "submitted", "prompt": "p", "agent": "hand", "timeout": 1}, *start, asked)
        tg.start_soon(beat)
        await send("job-q", {"type": "submitted", "prompt": "p", "agent": "hand"}, *start, asked)
        await wait_for_state(amqtt.url, ws_id, "job-w", lambda r: r["status"] == "waiting")
        await send("job-t", {"type": "submitted", "prompt": "p", "agent": "hand", "timeout": 1}, *start)
        await wait_for_state(amqtt.url, ws_id, "job-t", lambda r: r["status"] == "timed_out", timeout=20)
        quiet = await wait_for_state(amqtt.url, ws_id, "job-q", lambda r: r["status"] == "lost", timeout=20)
        assert (await wait_for_state(amqtt.url, ws_id, "job-w"))["status"] == "waiting"

        code, out, err = await _answer(amqtt.url, ws, "job-w", "yes")
        assert code == 0, err
        ended = await wait_for_state(amqtt.url, ws_id, "job-w", lambda r: r["status"] == "timed_out", timeout=20)
        tg.cancel_scope.cancel()
    assert "no sign of life" in quiet["error"] and quiet["waited"] > 1.5, quiet
    ran_after_answer = (
        datetime.fromisoformat(ended["finished_at"].replace("Z", "+00:00"))
        - datetime.fromisoformat(ended["resumed_at"].replace("Z", "+00:00"))
    ).total_seconds()
    assert ran_after_answer > 1.4, "its timeout (1 s + 0.5 s grace) counted from the answer, not from its start"
    assert ended["waited"] > 2
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_the_dashboard_shows_the_question_and_answers_it(ws: WorkspacePaths) -> None:
    from dashboard_support import browser_page, up_with_dashboard
    from playwright.async_api import expect

    script = f'a=$({BIN}/mam ask "Deploy to staging?" --choice yes --choice no) || exit 9\necho "got $a"\n'
    async with (
        up_with_dashboard(ws) as (url, page_url),
        agent_runner(url, ws, "--profile", "shell", agent="shell", env=_runner_env()),
        browser_page() as page,
    ):
        await page.goto(page_url)
        await expect(page.locator("#projector")).to_contain_text("projector online", timeout=15_000)
        await submit(url, ws, "job-web", script, agent="shell")
        row = page.locator('#jobs tbody tr[data-job-id="job-web"]')
        await expect(row.locator(".status")).to_have_text("waiting", timeout=30_000)
        await expect(row).to_contain_text("asks: Deploy to staging?")
        await row.click()
        await expect(page.locator("#answer")).to_be_visible(timeout=15_000)
        await expect(page.locator("#question")).to_have_text("Deploy to staging?")
        await expect(page.locator("#answer input[name=text]")).to_be_hidden()
        await page.locator('#choices button[data-choice="yes"]').click()
        # The verdict says the job's status when the answer's record came back: running, or already succeeded
        # when the script's echo and exit won the race to the registry.
        verdict = re.compile(r"answer recorded: job-web is (running|succeeded)")
        await expect(page.locator("#verdict")).to_contain_text(verdict, timeout=15_000)
        await expect(row.locator(".status")).to_have_text("succeeded", timeout=30_000)
        await expect(page.locator("#output")).to_contain_text("got yes", timeout=15_000)
        await expect(page.locator("#answer")).to_be_hidden()


async def test_an_mcp_client_answers_with_answer_job(ws: WorkspacePaths) -> None:
    from mcp_support import call, mcp_session, refused

    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Which?" --choice left --choice right) || exit 9\necho "took $a"\n'
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", env=_runner_env()),
        mcp_session(ws, "--broker", url) as session,
    ):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert tools["answer_job"].input_schema["required"] == ["job", "answer"]
        await submit(url, ws, "job-mcp", script, agent="shell")
        await wait_for_state(url, ws_id, "job-mcp", lambda r: r["status"] == "waiting", timeout=30)
        assert "'up' is not one of the choices" in await refused(session, "answer_job", job="job-mcp", answer="up")
        answered = await call(session, "answer_job", job="job-m", answer="right")  # a write: 4 characters or more
        assert answered["status"] == "running" and answered["job"]["answer"] == "right"
        done = await wait_for_state(url, ws_id, "job-mcp", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["result"] == "took right\n"


@pytest.mark.fast
def test_a_retried_attempt_starts_without_the_waits_of_the_one_before() -> None:
    answered = _fold(_asked(), ev.InputProvided(answer="go"), _at(3), "a1")
    assert isinstance(answered, JobRecord) and answered.waited == 2.0
    retrying = replace(answered, status=Status.RETRYING, retries=2, attempt=1, attempts=[])
    again = _fold(retrying, ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, 0, 0, 4)), _at(4), "r2")
    assert isinstance(again, JobRecord) and again.status is Status.SUBMITTED
    assert again.waited is not answered.waited and again.resumed_at is not answered.resumed_at, "unset again"
    assert again.question == "Proceed?", "the question asked stays in the record"


async def test_a_job_gets_its_runners_broker_so_mam_inside_it_reaches_the_same_one(ws: WorkspacePaths) -> None:
    """Without MAM_BROKER_URL of its own, a runner hands its --broker to each job, so `mam ask`
    (and `mam submit`, `mam mcp`) inside the job need no runtime file on the job's host."""
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", env=_runner_env()),
    ):
        await submit(url, ws, "job-env", 'echo "broker=$MAM_BROKER_URL"\n', agent="shell")
        done = await wait_for_state(url, ws_id, "job-env", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["result"] == f"broker={url}\n", done
