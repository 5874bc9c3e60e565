"""`mam show` and `mam events`: one job's record, and its audit log (a pruned job's from its archive)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import msgspec

from mam.cli.completers import complete
from mam.cli.output_form import add_output_arg, output_form, print_document, print_items
from mam.cli.tables import short
from mam.contract import routing
from mam.contract.events import GitInfo
from mam.contract.humanize import ago, parse_time
from mam.contract.output_accounting import incomplete_lines, seq_list
from mam.contract.record import JobRecord, Status
from mam.contract.terminal import safe
from mam.contract.timefmt import utc_now
from mam.git.job_ref import foreign_branch, own_branch
from mam.process.args import job_id
from mam.process.options import add_broker_arg, add_workspace_args, workspace_from_args
from mam.registry.reading import NotFound, read_events, read_pruned, read_record, resolve_id


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = sub.add_parser("show", help="show one job's record")
    complete(show.add_argument("job_id", type=job_id, metavar="JOB",
                               help="the job's id, or any unique prefix or suffix of it"), "job")
    add_output_arg(show, wide=None, name="job/<id>")
    show.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(show)
    add_broker_arg(show)
    show.set_defaults(handler=cmd_show)

    events = sub.add_parser("events", help="show one job's audit log")
    complete(events.add_argument("job_id", type=job_id, metavar="JOB",
                                 help="the job's id, or any unique prefix or suffix of it"), "job")
    add_output_arg(events, wide="also each event's id, and its fields uncut", name="event/<id>")
    events.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(events)
    events.set_defaults(handler=cmd_events)


def _dump(value: Any, form: str = "json") -> None:
    print_document(msgspec.to_builtins(value), form)


_INDENT = 20


def _show_text(record: JobRecord) -> None:
    """One key a line; a multi-line value continues on lines indented under its first; times with their age."""
    now = utc_now()
    for key, value in msgspec.to_builtins(record).items():
        if value in (None, {}, "", []):
            continue
        if key == "attempts":
            shown = "\n".join(_attempt_line(attempt) for attempt in value)
        elif key in ("output_seqs", "outputs_missing"):  # [first, last] ranges: `0-41`, `4, 7`
            shown = seq_list(value, shown=32)
        elif key == "denials":  # one refused tool call a line
            shown = "\n".join(safe(str(item)) for item in value)
        elif key == "status" and value in ("succeeded", "failed") and record.denials:
            count = len(record.denials)
            shown = f"{value}  ({count} tool call{'s' if count != 1 else ''} denied at its permission level)"
        elif isinstance(value, list):
            shown = safe(", ".join(str(item) for item in value))
        elif isinstance(value, dict):  # one `key: value` a line (git, usage, labels), not one line of JSON
            shown = "\n".join(f"{k}: {safe(v if isinstance(v, str) else json.dumps(v))}" for k, v in value.items()
                              if v is not None) or "{}"
            if key == "git_at_finish" and record.git_at_finish is not None:
                shown += "".join(f"\n{line}" for line in _worktree_lines(record.git_at_finish, record.job_id))
        else:
            shown = safe(str(value)).replace("\t", "    ").rstrip("\n")
            if key.endswith("_at") and isinstance(value, str) and parse_time(value) is not None:
                shown += f"  ({ago(value, now)})"
        lines = shown.split("\n")
        print(f"{key:<{_INDENT}}{lines[0]}")
        for more in lines[1:]:
            print(f"{'':<{_INDENT}}{more}".rstrip())
    for line in incomplete_lines(record):  # a loss on the way is said in words, not only in keys
        print(line)


def _attempt_line(attempt: dict[str, Any]) -> str:
    """One ended attempt of a job with a retry policy: `1 failed (exit 1) on r1 at ...: error`."""
    code = attempt.get("exit_code")
    ended = f"released (was {attempt['status']})" if attempt.get("released") else attempt["status"]
    line = f"{attempt['attempt']} {ended}" + (f" (exit {code})" if code is not None else "")
    line += f" on {attempt.get('runner') or '?'} at {attempt.get('finished_at') or '?'}"
    error = " ".join((attempt.get("error") or "").split())
    return safe(f"{line}: {error[:120]}" if error else line)


def _worktree_lines(git: GitInfo, job: str) -> list[str]:
    """For a job run in a worktree (`base` recorded): its branch, diffstat, and how to review it."""
    if not git.base or not git.commit:
        return []
    foreign = foreign_branch(job, git.branch)
    if foreign is not None:  # what a client sent: review and landing refuse it (mam.git.job_ref)
        return [safe(f"branch {foreign[:80]}: not the job's own branch {own_branch(job)}; mam diff, merge and "
                     "discard refuse it", keep_layout=False)]
    if git.commit == git.base:  # nothing committed: the runner deleted the empty branch
        return ["no changes: the job committed nothing (no branch kept)"]
    files, plus, minus = git.files_changed or 0, git.insertions or 0, git.deletions or 0
    stat = f"{files} file{'s' * (files != 1)} changed, {plus} insertion{'s' * (plus != 1)}(+), " \
        f"{minus} deletion{'s' * (minus != 1)}(-)"
    branch = f"branch {safe(git.branch or '(detached)')}: {stat}"
    land = f"land: mam merge {job} (or --squash), or mam discard {job}; mam diff {job} shows it"
    if git.remote:  # run on another machine: the branch is on its remote until mam diff/merge fetch it
        if git.push_error:
            return [branch, safe(f"not pushed to {git.remote}: {git.push_error}"[:200]),
                    "its work stays in the runner's clone"]
        return [branch, safe(f"pushed to {git.remote}; review: mam diff {job} (fetches it)"), land]
    return [branch, f"review: git diff {git.base}..{git.commit}", land]


def cmd_show(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    job = resolve_id(workspace, args.job_id)
    try:
        record = read_record(workspace, job)
    except NotFound:
        pruned = read_pruned(workspace, job)
        if pruned is None:
            raise
        record, where = pruned  # its last record, from its archived log
        if form == "name":
            print(f"job/{record.job_id}")
        elif form:
            _dump(msgspec.to_builtins(record) | {"archived_log": str(where)}, form)
        else:
            _show_text(record)
            print(f"{'archived_log':<{_INDENT}}{where}  (pruned: `mam events {job}` reads it)")
        return 0
    if form == "name":
        print(f"job/{record.job_id}")
        return 0
    _dump(record, form) if form else _show_text(record)
    if not form and record.status is Status.SUBMITTED and routing.required(record):
        # a broker connection (MQTT, TLS, the state's signature): only for a queued job that requires
        # runner labels; every other job is the registry's file alone (docs/performance.md)
        from mam.cli.show_routing import queue_note

        if note := queue_note(args, workspace, record):
            print(safe(note, keep_layout=False))
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    entries = read_events(workspace, resolve_id(workspace, args.job_id))
    if form == "json":
        print(json.dumps(entries, indent=2))
        return 0
    if form in ("yaml", "name"):
        print_items(entries, form, document=lambda entry: entry,
                    name=lambda entry: f"event/{entry.get('event', {}).get('id')}")
        return 0
    for entry in entries:
        event = entry.get("event", {})
        extra = {k: v for k, v in event.items() if k not in ("type", "id", "job_id", "v", "ts")}
        detail = short(json.dumps(extra), 1_000_000 if form == "wide" else 80)
        ident = f"{safe(str(event.get('id')), keep_layout=False)}  " if form == "wide" else ""
        print(f"{entry.get('seq'):>4}  {entry.get('received_at')}  {ident}{event.get('type'):<17}{detail}")
    return 0
