"""`mam ask` and `mam answer`: a running job asks a person a question, a person answers it.

`mam ask "Proceed?"` runs inside a job (the runner sets `MAM_JOB_ID`,
`MAM_WORKSPACE` and `WORKSPACE_ROOT` for its agent): it publishes
`input_requested`, which the projector records (the job is `waiting`, the
question in its retained state for every subscriber), then blocks until the
job's state carries the answer to that question, prints it on stdout and
exits 0. `mam answer JOB TEXT` publishes `input_provided` and returns the
projector's verdict, like `mam cancel`. States are checked like every
writer's (`mam.contract.signing`: verified when the workspace's key is on this machine).
"""

from __future__ import annotations

import argparse
import json
import os

import anyio
import msgspec

from mam.agents.answers import answer_of, wait_answer
from mam.agents.publisher import Publisher, WaitTimeout
from mam.cli.completers import complete
from mam.cli.selection import resolve_for_write
from mam.cli.write_common import check_event
from mam.client.inbox import messages
from mam.contract import events as ev
from mam.contract.errors import Refused, UsageError
from mam.contract.record import JobRecord, Status
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id, positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args

VERDICT_TIMEOUT = 30.0
"""How long each command waits for the projector to record (or refuse) what it published."""


def register(subparsers: Subparsers) -> None:
    ask = subparsers.add_parser(
        "ask",
        help="(inside a job) ask a person a question; prints the answer once given",
        description="Ask a person a question from inside a running job: the job is `waiting` until someone "
        "runs `mam answer JOB TEXT` (or answers in the dashboard); the answer is printed on stdout (exit 0). "
        "Exit 1 if the projector refuses the question or the job ends first, 3 if no answer came in --timeout "
        "(the question is then withdrawn and the job runs on).",
    )
    complete(ask.add_argument("question", metavar="QUESTION", help="the question, as the person will read it"), "free")
    complete(
        ask.add_argument(
            "--choice",
            action="append",
            default=[],
            metavar="C",
            help="an allowed answer (repeatable); other answers are refused",
        ),
        "free",
    )
    complete(
        ask.add_argument(
            "--timeout",
            type=positive_seconds,
            metavar="SECONDS",
            help="give up waiting after this long (default: wait until answered)",
        ),
        "free",
    )
    complete(
        ask.add_argument("--job", type=job_id, metavar="JOB", help="the job that asks (default: $MAM_JOB_ID)"), "job"
    )
    add_workspace_args(ask)
    add_broker_arg(ask)
    ask.set_defaults(handler=run_ask)

    answer = subparsers.add_parser(
        "answer",
        help="answer the question a waiting job asked; returns once the projector has recorded it",
        description="Answer a waiting job's question. Exit 0 once recorded (the job runs on), 1 if refused "
        "(the job is not waiting, or the answer is not one of the question's choices).",
    )
    complete(
        answer.add_argument(
            "job_id",
            type=job_id,
            metavar="JOB",
            help="the job's id, or any unique prefix or suffix of it among the states the broker retains",
        ),
        "job",
    )
    complete(answer.add_argument("text", metavar="TEXT", help="the answer"), "free")
    complete(
        answer.add_argument(
            "--timeout",
            type=positive_seconds,
            default=VERDICT_TIMEOUT,
            metavar="SECONDS",
            help="how long to wait for the verdict (default 30); no verdict in time exits 3",
        ),
        "free",
    )
    answer.add_argument("--json", action="store_true", help="print the recorded state as JSON")
    add_workspace_args(answer)
    add_broker_arg(answer)
    answer.set_defaults(handler=run_answer)


def _asking_job(args: argparse.Namespace) -> str:
    if args.job:
        return str(args.job)
    found = os.environ.get("MAM_JOB_ID")
    if not found:
        raise UsageError("mam ask runs inside a job: MAM_JOB_ID is not set; pass --job JOB to ask for another job")
    try:
        return job_id(found)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"MAM_JOB_ID: {exc}") from None


def run_ask(args: argparse.Namespace) -> int:
    job = _asking_job(args)
    repeated = sorted({c for c in args.choice if args.choice.count(c) > 1})
    if repeated:
        raise UsageError(f"--choice {repeated[0]!r} is given twice")
    event = check_event(
        ev.InputRequested(question=args.question, choices=args.choice or None),
        {"question": "QUESTION", "choices": "--choice"},
    )
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-ask") as pub:
            await _started(pub, job)
            asked = await pub.publish_and_wait(job, event, timeout=VERDICT_TIMEOUT)
            question_id = asked.question_id if isinstance(asked.question_id, str) else ""
            try:
                with anyio.fail_after(args.timeout):
                    record = await wait_answer(pub, job, question_id)
            except TimeoutError:
                record = await _withdraw(pub, job, question_id, args.timeout)
            print(answer_of(record, question_id))
        return 0

    return anyio.run(go)


async def _started(pub: Publisher, job: str) -> None:
    """Return once the job's state says its agent has started. The runner publishes `started` on its
    own connection just before it starts the agent, so a question asked at once could otherwise reach
    the projector first (and be refused: only a running job asks). No state at all, or none in time:
    the question goes out, and the projector's verdict says what is wrong."""
    first = await pub.state(job)
    if first is None or first.status not in (Status.SUBMITTED, Status.CLAIMED):
        return
    topic = pub.topics.state(job)
    with anyio.move_on_after(VERDICT_TIMEOUT):
        async for message in messages(pub.client):
            payload = message.payload if isinstance(message.payload, bytes) else b""
            record = pub.states.record(topic, payload) if str(message.topic) == topic else None
            if record is not None and record.status not in (Status.SUBMITTED, Status.CLAIMED):
                return


async def _withdraw(pub: Publisher, job: str, question_id: str, waited: float) -> JobRecord:
    """No answer in time: withdraw the question (the job runs on) and say so; an answer that won the race
    is taken instead."""
    withdrawal = ev.InputWithdrawn(question_id=question_id, reason=f"no answer within {waited:g}s")
    try:
        await pub.publish_and_wait(job, withdrawal, timeout=VERDICT_TIMEOUT)
    except Refused:
        current = await pub.state(job)
        if current is not None and current.question_id == question_id and isinstance(current.answer, str):
            return current
    raise WaitTimeout(f"no answer within {waited:g}s; the question was withdrawn and job {job} runs on")


def run_answer(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-cli") as pub:
            job = await resolve_for_write(pub, args.job_id, "answer")
            current = await pub.state(job)
            asked = current.question_id if current is not None and current.status is Status.WAITING else None
            event = check_event(ev.InputProvided(answer=args.text, question_id=asked or None), {"answer": "TEXT"})
            record = await pub.publish_and_wait(job, event, timeout=args.timeout)
            if args.json:
                print(json.dumps(msgspec.to_builtins(record), indent=2))
            else:
                print(f"{record.job_id} {record.status.value}")
        return 0

    return anyio.run(go)


__all__ = ["register", "run_answer", "run_ask"]
