"""`mam prune`: remove finished jobs older than a duration, one `pruned` event each, and wait for the verdicts.

The jobs are chosen here, from the registry like `mam jobs` reads it
(`mam.registry.pruning.select`: finished at least `--older-than` ago, in one of
`--status`, with nothing unfinished under it). The projector checks every
event again; on taking one it archives the job's audit log, keeps a tombstone
for its id, removes its record and clears its retained state. `--dry-run`
only lists what would go.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import aiomqtt
import anyio

from mam.cli.completers import complete
from mam.cli.output_form import add_output_arg, output_form, print_document
from mam.client.inbox import messages
from mam.client.mqtt import unreachable
from mam.contract import events as ev
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError, UsageError
from mam.contract.humanize import ago, parse_duration
from mam.contract.terminal import safe
from mam.contract.timefmt import utc_now
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.args import positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args
from mam.registry.archive import ARCHIVE_DIR
from mam.registry.pruning import Policy, Selection, finished_statuses, select, workspace_briefs
from mam.registry.query import parse_statuses

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher

ROUND = 500
"""Events published (and state topics subscribed) at a time."""


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: Subparsers) -> None:
    prune = sub.add_parser(
        "prune",
        help="remove finished jobs older than a duration: records and retained states go, logs are archived",
        description="Publish one 'pruned' event per finished job that finished at least DURATION ago (and has "
        "nothing unfinished under it), and wait for the projector's verdicts: exit 0 when all were pruned, 1 when "
        "some were refused, 3 when no projector serves the workspace or no verdict came in time.",
    )
    complete(
        prune.add_argument(
            "--older-than",
            required=True,
            type=duration,
            metavar="DURATION",
            help="only jobs that finished at least this long ago: 30d, 12h, 1h30m (0s: any finished job)",
        ),
        "free",
    )
    complete(
        prune.add_argument(
            "--status",
            action="append",
            default=[],
            metavar="S[,S...]",
            help="only jobs that ended so (repeatable, or a comma list; default: every finished status)",
        ),
        "status",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would be pruned; publish nothing")
    complete(
        prune.add_argument(
            "--timeout",
            type=positive_seconds,
            default=60.0,
            metavar="SECONDS",
            help="how long to wait for the verdicts (default 60); no verdict in time exits 3",
        ),
        "free",
    )
    add_output_arg(prune, wide=None, name="job/<id> (pruned, or with --dry-run would be)")
    prune.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(prune)
    add_broker_arg(prune)
    prune.set_defaults(handler=run_prune)


def _policy(args: argparse.Namespace) -> Policy:
    try:
        statuses = finished_statuses(parse_statuses(args.status))
    except ValueError as exc:
        raise UsageError(f"--status: {exc}") from None
    return Policy(older_than=args.older_than, statuses=statuses)


def run_prune(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    policy = _policy(args)
    now = utc_now()
    selection = select(workspace_briefs(workspace), policy, now)
    chosen = [brief.job_id for brief in selection.chosen]
    if args.dry_run or not chosen:
        _print_plan(selection, policy, args, workspace, form)
        return 0
    event = ev.Pruned(reason=f"mam prune: {policy.describe()}"[:256])
    pruned, refused = anyio.run(_prune, workspace, broker_from_args(args, workspace), chosen, event, args.timeout)
    cleaned, branches_kept = _clean_branches(workspace, pruned)
    if form in ("json", "yaml"):
        found = {"pruned": pruned, "refused": refused, "kept": selection.kept}
        if cleaned or branches_kept:
            found["branches"] = {"cleaned": cleaned, "kept": branches_kept}
        print_document(found, form)
    elif form == "name":
        print("".join(f"job/{job_id}\n" for job_id in pruned), end="")
    else:
        for job_id in pruned:
            print(f"pruned {job_id}")
        for job_id in cleaned:
            print(f"removed the branch and worktree of pruned job {job_id}")
        for job_id, why in branches_kept.items():
            print(f"mam: kept the branch of pruned job {job_id}: {safe(why)}", file=sys.stderr)
        _say_kept(selection)
        for job_id, reason in refused.items():
            print(f"mam: {job_id} not pruned: {safe(reason)}", file=sys.stderr)
        where = workspace.logs_dir / ARCHIVE_DIR
        print(f"mam: pruned {len(pruned)} job(s); their logs are in {where}", file=sys.stderr)
    return 1 if refused else 0


def _clean_branches(workspace: Workspace, pruned: list[str]) -> tuple[list[str], dict[str, str]]:
    """The pruned jobs' worktrees and branches go where nothing is lost (`mam.git.job_branches`); unmerged ones stay."""
    from mam.git.job_branches import clean, inventory

    if not pruned:
        return [], {}
    try:
        found = inventory(workspace, only=set(pruned))
    except MamError:  # not a git repository (or no git): the jobs have no branches
        return [], {}
    return clean(found)


def _print_plan(
    selection: Selection, policy: Policy, args: argparse.Namespace, workspace: Workspace, form: str | None
) -> None:
    """`--dry-run`, or nothing to prune: what would go, and what an unfinished job keeps."""
    ids = [brief.job_id for brief in selection.chosen]
    if form in ("json", "yaml"):
        found: dict[str, object] = {"would_prune": ids} if args.dry_run else {"pruned": [], "refused": {}}
        print_document(found | {"kept": selection.kept}, form)
        return
    if form == "name":
        print("".join(f"job/{job_id}\n" for job_id in ids), end="")
        return
    now = utc_now()
    width = max((len(brief.job_id) for brief in selection.chosen), default=0)  # every id padded, not only long ones
    for brief in selection.chosen:
        print(f"{brief.job_id:<{width}}  {brief.status.value:<9}  finished {ago(brief.finished_at, now)}")
    _say_kept(selection)
    if args.dry_run:
        print(f"mam: would prune {len(ids)} job(s) {policy.describe()} (--dry-run: nothing published)", file=sys.stderr)
    else:
        print(f"mam: nothing to prune: no job in {workspace.registry_dir} {policy.describe()}", file=sys.stderr)


def _say_kept(selection: Selection) -> None:
    for job_id, below in selection.kept.items():
        print(f"mam: keeping {job_id}: {below} under it has not finished", file=sys.stderr)


async def _prune(
    workspace: Workspace, broker: Brokers, job_ids: list[str], event: ev.Pruned, timeout: float
) -> tuple[list[str], dict[str, str]]:
    from mam.agents.publisher import Publisher, WaitTimeout

    pruned: list[str] = []
    refused: dict[str, str] = {}
    async with Publisher(workspace, broker, by="mam-cli") as pub:
        try:
            with anyio.fail_after(timeout):
                for start in range(0, len(job_ids), ROUND):
                    await _round(pub, job_ids[start : start + ROUND], event, pruned, refused, first=start == 0)
        except TimeoutError:
            missing = len(job_ids) - len(pruned) - len(refused)
            raise WaitTimeout(
                f"{missing} of {len(job_ids)} prune(s) had no verdict within {timeout:g}s ({len(pruned)} pruned): "
                "they may still be recorded; run `mam prune` again (a pruned job is not chosen twice), "
                "or raise --timeout"
            ) from None
        except aiomqtt.MqttError as exc:
            raise unreachable(broker, exc) from None
    return pruned, refused


async def _round(
    pub: Publisher, job_ids: list[str], event: ev.Pruned, pruned: list[str], refused: dict[str, str], *, first: bool
) -> None:
    """Publish one event per job, subscribed first to their states and the refusals; collect each verdict."""
    client, topics = pub.client, pub.topics
    sent = {job_id: pub.stamp(event) for job_id in job_ids}
    waiting = {stamped.id: job_id for job_id, stamped in sent.items()}
    await client.subscribe([(topics.rejected, 1), *((topics.state(job_id), 1) for job_id in job_ids)])
    for index, (job_id, stamped) in enumerate(sent.items()):
        if first and index == 0:
            await pub.publish_served(job_id, stamped)  # only once a projector serves the workspace
        else:
            await pub.publish(job_id, stamped)
    async for message in messages(client):
        topic = str(message.topic)
        payload = message.payload if isinstance(message.payload, bytes) else b""
        if topic == topics.rejected:
            refusal = pub.states.refusal(payload)
            answered = waiting.pop(str(refusal.get("event_id")), None) if refusal is not None else None
            if answered is not None and refusal is not None:
                refused[answered] = str(refusal.get("reason"))
        else:
            record = pub.states.record(topic, payload)
            answered = waiting.pop(record.last_event_id or "", None) if record is not None else None
            if answered is not None:
                pruned.append(answered)
        if not waiting:
            break
    else:
        raise aiomqtt.MqttError("the broker closed the connection")
    await client.unsubscribe([topics.state(job_id) for job_id in job_ids])


__all__ = ["register", "run_prune"]
