"""`mam submit` and `mam session`: the writers' command lines (`mam cancel` is `cancel.py`, registered here)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import msgspec

from mam.agents.inside_job import default_parent
from mam.agents.publisher import Publisher, new_job_id
from mam.agents.resume import resume_fields
from mam.agents.runner_hint import no_runner
from mam.agents.sessions import ONBOARDING_LABEL, briefing, sessions
from mam.cli.cancel import register_cancel
from mam.cli.completers import complete
from mam.cli.limits import add_resume_arg
from mam.cli.option_flags import add_option_flags, option_values
from mam.cli.output_form import add_output_arg, output_form, print_items
from mam.cli.retry import register as register_retry
from mam.cli.retry import resolve_after
from mam.cli.selection import resolve_retained
from mam.cli.wait import register as register_wait
from mam.cli.write_common import add_wait_args, check_event, event_id, flagged, print_published, print_record
from mam.client.follow import follow
from mam.client.logged_output import Followed, outcome_code, stopped_following
from mam.client.runner_look import RunnerLook
from mam.contract import events as ev
from mam.contract import job_spec, presence, routing
from mam.contract.errors import UsageError
from mam.contract.outcome import outcome_line
from mam.contract.record import JobRecord
from mam.contract.status import AgentStatus
from mam.contract.terminal import safe, short
from mam.git.provenance import git_info, submit_git
from mam.process.argparse_internals import Subparsers
from mam.process.args import agent_name, job_id, positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args
from mam.registry.query import parse_labels


def register(subparsers: Subparsers) -> None:
    submit = subparsers.add_parser(
        "submit",
        help="submit a job; returns once the projector has recorded it",
        description="Submit a job. Returns once the projector has recorded it (exit 0, prints its id) or "
        "refused it (exit 1, its reason on stderr); exit 3 if no projector serves the workspace or no "
        "verdict came in time.",
    )
    complete(submit.add_argument("--prompt", required=True, help="the job's prompt; '-' reads it from stdin"), "free")
    complete(
        submit.add_argument(
            "--agent",
            type=agent_name,
            help="agent that should run it, e.g. claude-code (required, except with --resume)",
        ),
        "agent",
    )
    complete(submit.add_argument("--agent-session", metavar="S", help="the agent session it belongs to"), "session")
    complete(submit.add_argument("--role", metavar="R"), "role")
    complete(
        submit.add_argument("--label", action="append", default=[], metavar="K=V", help="a label (repeatable)"), "label"
    )
    complete(submit.add_argument("--job-id", type=job_id, metavar="ID", help="job id (default: generated)"), "free")
    tree = submit.add_mutually_exclusive_group()
    complete(
        tree.add_argument(
            "--parent",
            type=job_id,
            metavar="JOB",
            help="the job that delegates this one (default: the job this runs inside, $MAM_JOB_ID)",
        ),
        "job",
    )
    tree.add_argument(
        "--no-parent", action="store_true", help="submit a root job even inside a job (no parent from $MAM_JOB_ID)"
    )
    complete(
        submit.add_argument("--job-timeout", type=positive_seconds, metavar="SECONDS", help="how long the job may run"),
        "free",
    )
    add_option_flags(submit)
    add_resume_arg(submit)
    add_wait_args(
        submit,
        wait_help="(the default; kept for scripts) return once the projector has recorded the job",
        no_wait_help="publish and return once the broker has acknowledged it, as fast as a publish: no projector "
        "is looked for first (the projector's session on the broker keeps it while the projector is away); "
        "`mam show JOB` says whether it was recorded",
    )
    submit.add_argument(
        "--follow",
        action="store_true",
        help="then stream the job's output and exit with its outcome (0 only if it succeeded)",
    )
    add_workspace_args(submit)
    add_broker_arg(submit)
    submit.set_defaults(handler=run_submit)

    session = subparsers.add_parser("session", help="agent sessions: create one (with its onboarding job), list them")
    session_sub = session.add_subparsers(dest="session_command", required=True, metavar="ACTION")
    create = session_sub.add_parser("create", help="register a session by submitting its onboarding job")
    complete(create.add_argument("--agent", required=True, type=agent_name), "agent")
    complete(create.add_argument("--role", required=True), "role")
    complete(create.add_argument("--session", required=True, metavar="NAME"), "free")
    complete(create.add_argument("--timeout", type=positive_seconds, default=30.0, metavar="SECONDS"), "free")
    create.add_argument("--json", action="store_true")
    add_workspace_args(create)
    add_broker_arg(create)
    create.set_defaults(handler=run_session_create)
    listing = session_sub.add_parser("list", help="sessions and their jobs, from the registry")
    add_output_arg(listing, wide="also each job's agent and prompt", name="session/<name>")
    listing.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(listing)
    listing.set_defaults(handler=run_session_list)

    register_cancel(subparsers)
    register_retry(subparsers)
    register_wait(subparsers)


def _labels(pairs: list[str]) -> dict[str, str]:
    try:
        return parse_labels(pairs)
    except ValueError as exc:
        raise UsageError(f"invalid --label {exc}") from None


def _prompt(value: str) -> str:
    prompt = sys.stdin.read() if value == "-" else value
    if not prompt.strip():
        raise UsageError("the prompt is empty: pass --prompt TEXT or pipe it in with --prompt -")
    return prompt


def cli_spec(args: argparse.Namespace, prompt: str, agent: str) -> job_spec.JobSpec:
    """`mam submit`'s flags as the job spec: an option per flag of the same name, and the repeatable ones joined;
    a value out of bounds is refused naming the flag (`mam.contract.value_words`)."""
    given = {name: getattr(args, name, None) for name in job_spec.names("cli")}
    given.update(
        prompt=prompt,
        agent=agent,
        labels=_labels(args.label) or None,
        no_parent=args.no_parent or None,
        **option_values(args),
    )
    return job_spec.convert(given, front="cli")


def run_submit(args: argparse.Namespace) -> int:
    if args.follow and args.no_wait:
        raise UsageError("--follow needs the job recorded first: drop --no-wait")
    if not args.agent and not args.resume:
        raise UsageError("--agent is required: name the agent that should run the job (or --resume JOB)")
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)
    prompt = _prompt(args.prompt)

    parent = default_parent(args.parent, no_parent=args.no_parent)
    git = submit_git(workspace.root, parent)  # a child of a worktree job: its parent's branch

    def submitted(agent: str, resume: dict[str, Any]) -> ev.AnyEvent:
        spec = cli_spec(args, prompt, agent)
        try:
            event = job_spec.submitted(spec, parent=parent, git=git)
        except UsageError as exc:
            raise UsageError(flagged(str(exc))) from None
        return check_event(msgspec.structs.replace(event, **resume) if resume else event)

    event = submitted(args.agent or "resumed", {})  # every flag checked before any broker is reached
    job_id = args.job_id or new_job_id()
    recorded = False

    async def go() -> int:
        nonlocal recorded, event
        async with Publisher(workspace, broker, by="mam-cli") as pub:
            if args.resume:
                old_id = await resolve_retained(pub, args.resume)
                agent, fields = resume_fields(await pub.state(old_id), old_id, args.agent, workspace.root)
                event = submitted(agent, fields)
            if isinstance(event, ev.Submitted) and event.after:
                event = msgspec.structs.replace(event, after=await resolve_after(pub, event.after))
            if args.no_wait:
                print_published(job_id, await pub.publish(job_id, event), args.json)  # nothing looked for first
                return 0
            if args.follow:
                await pub.subscribe(pub.topics.events(job_id))  # again on a new connection
                record = await pub.publish_and_wait(job_id, event, timeout=args.timeout)
            else:
                record, runners = await _submit_and_look(pub, job_id, event, args.timeout)
                print_record(record, args.json)
                agent = record.agent
                if runners is not None and not presence.serving(runners, agent):
                    print(f"mam: warning: {safe(no_runner(agent, job_id, workspace.root, runners))}", file=sys.stderr)
                elif runners is not None and (
                    unmatched := presence.no_label_match(agent, routing.required(record), runners)
                ):
                    print(f"mam: warning: {safe(unmatched, keep_layout=False)}: job {job_id} waits", file=sys.stderr)
                return 0
            recorded = True
            print(job_id, file=sys.stderr)
            final = await follow(
                workspace, broker, job_id, from_log=False, client=pub.client, followed=Followed(seen={event_id(record)})
            )
            print(f"mam: {outcome_line(final)}", file=sys.stderr)
            return outcome_code(final.status)

    try:
        return anyio.run(go)
    except KeyboardInterrupt:
        if not recorded:
            raise
        print(f"\nmam: {stopped_following(job_id)}", file=sys.stderr)
        return 130


async def _submit_and_look(
    pub: Publisher, job_id: str, event: ev.AnyEvent, timeout: float
) -> tuple[JobRecord, list[AgentStatus] | None]:
    """Publish and wait for the verdict while reading, on a connection of its own, which runners are
    online (None if that could not be read); the read ends with the verdict once a runner that takes
    the job was seen (`RunnerLook`)."""
    look = RunnerLook(pub.broker, pub.topics)
    async with anyio.create_task_group() as tg:
        tg.start_soon(look.run)
        record = await pub.publish_and_wait(job_id, event, timeout=timeout)
        look.verdict_in(record.agent, routing.required(record))
    return record, look.runners()


def run_session_create(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)
    prompt = briefing(workspace, role=args.role, session=args.session, agent=args.agent)
    event = check_event(
        ev.Submitted(
            prompt=prompt,
            agent=args.agent,
            agent_session=args.session,
            role=args.role,
            labels=dict([ONBOARDING_LABEL]),
            git=git_info(workspace.root),
        )
    )

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-cli") as pub:
            print_record(await pub.publish_and_wait(new_job_id(), event, timeout=args.timeout), args.json)
        return 0

    return anyio.run(go)


def run_session_list(args: argparse.Namespace) -> int:
    from mam.registry.reading import iter_records

    form = output_form(args)
    found = sessions(iter_records(workspace_from_args(args)))
    if form in ("json", "yaml", "name"):
        print_items(
            found,
            form,
            name=lambda s: f"session/{s.name}",
            document=lambda s: {
                "session": s.name,
                "agent": s.agent,
                "role": s.role,
                "onboarding": s.onboarding,
                "jobs": [{"job_id": j.job_id, "status": j.status.value} for j in s.jobs],
            },
        )
        return 0
    for s in found:
        counts: dict[str, int] = {}
        for job in s.jobs:
            counts[job.status.value] = counts.get(job.status.value, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        line = f"{s.name}  agent={s.agent} role={s.role} onboarding={s.onboarding or '-'}  jobs: {summary}"
        print(safe(line, keep_layout=False))
        for job in s.jobs:
            more = f"  {job.agent}  {short(job.prompt, 60)}" if form == "wide" else ""
            print(f"  {job.job_id}  {job.status.value}{more}")
    return 0
