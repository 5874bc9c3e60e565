"""Which jobs a write (`mam cancel`, `mam retry`) touches: ids typed, or selectors, and a confirmation.

A write resolves a short id against the states the broker retains, like a
read, but needs at least `MIN_WRITE_CHARS` characters of it: `mam cancel 1`
must not cancel `long-1` because it happened to be the only id ending in 1.
An exact id of any length is taken. Selectors (`-l key=value`, `--status`)
pick among the retained states; more than `CONFIRM_ABOVE` jobs need `--yes`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import aiomqtt

from mam.agents.publisher import Publisher
from mam.cli.completers import complete
from mam.client.failover import connect
from mam.client.live import retained_states, snapshot_job_ids
from mam.client.mqtt import unreachable
from mam.contract.errors import Refused, UsageError
from mam.contract.record import JobRecord, Status
from mam.registry.query import MIN_WRITE_CHARS, NoSuchJob, check_write_id, parse_labels, parse_statuses, resolve_job_id

CONFIRM_ABOVE = 5
"""A write that would touch more jobs than this needs `--yes`."""

_FORMS = {"cancel": ("cancelled", "cancelling"), "retry": ("retried", "retrying")}


async def resolve_retained(pub: Publisher, text: str) -> str:
    """The job id `text` is, or uniquely starts or ends, among the states the broker retains.

    A writer opens no registry file, so `mam cancel` resolves a short id
    against the retained states. An id nothing matches, or any id when the
    broker did not deliver every retained state in time, goes out as typed
    (the projector refuses an unknown one). A short id that resolved is named
    on stderr, so the reader sees which job was meant."""
    known = await snapshot_job_ids(pub.broker, pub.topics, exact=text)
    if known is None:
        return text
    try:
        found = resolve_job_id(text, known)
    except NoSuchJob:
        return text
    if found != text:
        print(f"mam: {text} is job {found}", file=sys.stderr)
    return found


async def resolve_for_write(pub: Publisher, text: str, verb: str) -> str:
    """The job `text` names among the retained states: exactly, or as a unique prefix or suffix of at
    least `MIN_WRITE_CHARS` characters. Nothing matching is refused here (`no job 'x'`) when the
    broker delivered every retained state; otherwise the id goes out as typed and the projector
    refuses an unknown one."""
    known = await snapshot_job_ids(pub.broker, pub.topics, exact=text)
    if known is None:
        return text
    try:
        found = resolve_job_id(text, known)
    except NoSuchJob:
        # no projector answering comes first (exit 3): the retained states may then be incomplete
        try:
            await pub.client.subscribe(pub.topics.projector_status, qos=1)
            await pub.wait_projector(3.0)  # the same check its publish makes
        except aiomqtt.MqttError as exc:
            raise unreachable(pub.broker, exc) from None
        raise Refused(
            f"no job {text!r} in workspace {pub.workspace.id} (no id is, starts or ends with it): "
            "check the id with `mam jobs`"
        ) from None
    check_write_id(text, found, verb)
    if found != text:
        print(f"mam: {text} is job {found}", file=sys.stderr)
    return found


def add_selector_args(parser: argparse.ArgumentParser, verb: str) -> None:
    """`JOB...`, `-l key=value`, `--status S`, `--yes`."""
    complete(
        parser.add_argument(
            "-l",
            "--selector",
            action="append",
            default=[],
            metavar="K=V",
            help=f"{verb} every job with this label (repeatable: all must match)",
        ),
        "label",
    )
    complete(
        parser.add_argument(
            "--status",
            dest="select_status",
            action="append",
            default=[],
            metavar="S[,S...]",
            help=f"{verb} every job with one of these statuses (with -l: both must match)",
        ),
        "status",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"{verb} more than {CONFIRM_ABOVE} jobs (without it, the command lists them and stops)",
    )


def _selectors(args: argparse.Namespace) -> tuple[dict[str, str], frozenset[Status]]:
    try:
        labels = parse_labels(args.selector)
    except ValueError as exc:
        raise UsageError(f"-l: {exc}") from None
    try:
        statuses = parse_statuses(args.select_status)
    except ValueError as exc:
        raise UsageError(f"--status: {exc}") from None
    return labels, statuses


def has_selectors(args: argparse.Namespace) -> bool:
    return bool(args.selector or args.select_status)


async def select(pub: Publisher, args: argparse.Namespace, verb: str, fits: Callable[[JobRecord], bool]) -> list[str]:
    """The ids typed (each resolved, in the order typed) then the retained jobs the selectors match
    and `fits` takes (oldest first); each once. Refused when nothing is selected."""
    chosen: list[str] = []
    for text in args.job_ids:
        job = await resolve_for_write(pub, text, verb)
        if job not in chosen:
            chosen.append(job)
    if has_selectors(args):
        labels, statuses = _selectors(args)
        try:
            async with connect(pub.broker) as client:
                states = await retained_states(client, pub.topics, pub.states)
        except aiomqtt.MqttError as exc:
            raise unreachable(pub.broker, exc) from None
        matching = sorted(
            (
                r
                for r in states.values()
                if all(r.labels.get(k) == v for k, v in labels.items())
                and (not statuses or r.status in statuses)
                and fits(r)
            ),
            key=lambda r: (r.submitted_at or "", r.job_id),
        )
        chosen.extend(r.job_id for r in matching if r.job_id not in chosen)
        if not chosen:
            raise Refused(
                f"no job matches {_described(args)} that can be {_FORMS[verb][0]}: nothing done "
                "(`mam jobs` lists the jobs)"
            )
    return chosen


def _described(args: argparse.Namespace) -> str:
    parts = [f"-l {s}" for s in args.selector] + [f"--status {s}" for s in args.select_status]
    return " ".join(parts)


def confirm(jobs: list[str], verb: str, yes: bool) -> None:
    """Say which jobs a write of several touches; refuse more than `CONFIRM_ABOVE` without `--yes`."""
    if len(jobs) <= 1:
        return
    shown = ", ".join(jobs[:20]) + (f" and {len(jobs) - 20} more" if len(jobs) > 20 else "")
    if len(jobs) > CONFIRM_ABOVE and not yes:
        raise UsageError(
            f"this would {verb} {len(jobs)} jobs ({shown}): add --yes to {verb} more than {CONFIRM_ABOVE}; nothing done"
        )
    print(f"mam: {_FORMS[verb][1]} {len(jobs)} jobs: {shown}", file=sys.stderr)


__all__ = [
    "CONFIRM_ABOVE",
    "MIN_WRITE_CHARS",
    "add_selector_args",
    "confirm",
    "has_selectors",
    "resolve_retained",
    "resolve_for_write",
    "select",
]
