# PYTHON_ARGCOMPLETE_OK  (argcomplete: this program answers completion requests, mam.completion)
"""`mam`: submit, inspect and serve jobs of a workspace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from mam import __version__
from mam.broker_list import Brokers
from mam.cli_args import Parser, add_verbose, job_id, non_negative_int
from mam.cli_common import (
    add_broker_arg,
    add_workspace_args,
    broker_choice,
    broker_from_args,
    run_cli,
    setup_logging,
    workspace_from_args,
)
from mam.cli_global import add_global, suppress_in_subcommands
from mam.cli_global import check as check_global
from mam.completion import complete_if_asked
from mam.completion import register as register_completion
from mam.discovery import projector_info
from mam.errors import UsageError
from mam.events import GitInfo
from mam.humanize import ago, parse_time
from mam.output_accounting import incomplete_lines, seq_list
from mam.reading import NotFound, read_events, read_pruned, read_record, read_record_or_pruned, resolve_id
from mam.record import JobRecord
from mam.runtime import read_runtime
from mam.show_routing import queue_note
from mam.signing import fingerprint, load_workspace_key
from mam.status import ProjectorStatus
from mam.tables import short
from mam.terminal import safe
from mam.timefmt import utc_now
from mam.workspace import Workspace

PROG = "mam"


def _dump(value: Any) -> None:
    print(json.dumps(msgspec.to_builtins(value), indent=2))


def cmd_workspace(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    broker, source = broker_choice(args, workspace)
    runtime = read_runtime(workspace)
    info: dict[str, Any] = workspace.as_dict() | {"broker": broker.url, "broker_from": source}
    info["served_by"] = (
        {"process": runtime.served_by, "pid": runtime.pid, "broker": runtime.broker} if runtime else None
    )
    info["projector"] = projector_info(workspace.registry_dir)
    key = load_workspace_key(workspace)
    info["projector_key"] = fingerprint(key) if key is not None else None
    from mam.announced import describe as describe_announced
    from mam.announced import summary as announced_summary

    announced, unreachable_why = _announced(workspace, broker)
    info["projector_status"] = announced_summary(announced, utc_now()) if unreachable_why is None else None
    if unreachable_why is not None:
        info["broker_unreachable"] = unreachable_why
    if runtime is not None and _same_broker(runtime.broker, broker) is False:
        print(
            f"mam: warning: this client would use {broker.url} ({source}), but {runtime.served_by} "
            f"(pid {runtime.pid}) serves this workspace on {runtime.broker}: jobs published there are not "
            "recorded here; unset MAM_BROKER_URL or pass --broker " + runtime.broker,
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(17, *(len(key) + 1 for key in info))  # `broker_unreachable` is longer than the rest
        for key, value in info.items():
            if key == "projector":
                value = f"pid {value['pid']} on {value['broker']}" if value else "none running"
            elif key == "projector_key":
                value = value or "none yet (made at the projector's first start)"
            elif key == "served_by":
                value = f"{value['process']} (pid {value['pid']}) on {value['broker']}" if value else "nothing running"
            elif key == "projector_status":
                value = "unknown: the broker cannot be reached" if unreachable_why else describe_announced(
                    announced, utc_now())
            print(f"{key:<{width}}{value}")
    return 0


def _announced(workspace: Workspace, broker: Brokers) -> tuple[ProjectorStatus | None, str | None]:
    """The projector's retained status on the broker, or why the broker could not be asked."""
    import anyio

    from mam.announced import announced_status
    from mam.errors import BrokerUnreachable
    from mam.topics import Topics

    try:
        return anyio.run(announced_status, broker, Topics(workspace.id)), None
    except BrokerUnreachable as exc:
        return None, str(exc)


def _same_broker(a: str, b: Brokers) -> bool:
    """Whether the runtime file's broker list and the client's share a broker."""
    from mam.broker_list import overlap, parse_brokers

    return overlap(parse_brokers(a), b)


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
    if git.commit == git.base:  # nothing committed: the runner deleted the empty branch
        return ["no changes: the job committed nothing (no branch kept)"]
    files, plus, minus = git.files_changed or 0, git.insertions or 0, git.deletions or 0
    stat = f"{files} file{'s' * (files != 1)} changed, {plus} insertion{'s' * (plus != 1)}(+), " \
        f"{minus} deletion{'s' * (minus != 1)}(-)"
    return [f"branch {safe(git.branch or '(detached)')}: {stat}", f"review: git diff {git.base}..{git.commit}",
            f"land: mam merge {job} (or --squash), or mam discard {job}; mam diff {job} shows it"]


def cmd_show(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    job = resolve_id(workspace, args.job_id)
    try:
        record = read_record(workspace, job)
    except NotFound:
        pruned = read_pruned(workspace, job)
        if pruned is None:
            raise
        record, where = pruned  # its last record, from its archived log
        if args.json:
            _dump(msgspec.to_builtins(record) | {"archived_log": str(where)})
        else:
            _show_text(record)
            print(f"{'archived_log':<{_INDENT}}{where}  (pruned: `mam events {job}` reads it)")
        return 0
    _dump(record) if args.json else _show_text(record)
    if not args.json and (note := queue_note(args, workspace, record)):
        print(note)
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    entries = read_events(workspace, resolve_id(workspace, args.job_id))
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for entry in entries:
        event = entry.get("event", {})
        extra = {k: v for k, v in event.items() if k not in ("type", "id", "job_id", "v", "ts")}
        print(
            f"{entry.get('seq'):>4}  {entry.get('received_at')}  {event.get('type'):<17}{short(json.dumps(extra), 80)}"
        )
    return 0


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    end = "\n" if done >= total else ""
    print(
        f"\rrebuild [{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs", end=end, file=sys.stderr, flush=True
    )


def cmd_rebuild(args: argparse.Namespace) -> int:
    from mam.projector.rebuild import nothing_to_check, rebuild

    workspace = workspace_from_args(args)
    if args.verify and nothing_to_check(workspace) and not args.json:
        print(f"nothing to check: no registry at {workspace.registry_dir} and no audit log at {workspace.logs_dir}")
        return 0
    progress = _progress_bar if sys.stderr.isatty() and not args.json else None
    report = rebuild(workspace, verify=args.verify, progress=progress)
    if args.json:
        print(json.dumps(msgspec.to_builtins(report.__dict__), indent=2))
    else:
        verb = "checked" if args.verify else "rebuilt"
        print(f"{verb} {report.jobs} jobs from {report.events} events in {workspace.logs_dir}")
        for label, names, outcome in (
            ("differs from its log", report.differing, "fixed"),
            ("is missing", report.missing, "fixed"),
            ("has no audit log", report.orphans, "dropped"),
            ("is a symlink, never followed", report.links, "replaced; what it points at is untouched"),
            ("is not named by a legal job id (made before the rule)", report.kept, "kept as it is"),
        ):
            suffix = "" if args.verify else f" ({outcome})"
            for name in names:
                print(f"  {name}: record {label}{suffix}")
        for name, reason in report.corrupt.items():
            print(f"  {name}: audit log does not fold, record kept as it was: {reason}")
        for name, behind in report.in_flight.items():
            print(f"  {name}: record trails its log by {behind} events the projector is writing; matches up to there")
        print(f"query index: {report.index}" + ("" if args.verify else f" ({workspace.registry_dir}/.index.sqlite)"))
        for name in report.index_differing:
            print(f"  {name}: its row in the query index differs from its record (`mam rebuild` makes it anew)")
        if report.pruned or report.pruning:
            print(f"pruned jobs: {report.pruned}, archived in {workspace.logs_dir}/_archive")
        for name in report.pruning:
            done = "" if args.verify else " (archived)"
            print(f"  {name}: its live log ends in 'pruned' but is not archived yet{done}")
        for name in report.tombstones_differing:
            print(f"  {name}: its tombstone differs from its archived log (`mam rebuild` makes it anew)")
    if report.corrupt or (args.verify and not report.clean):
        return 1
    return 0


def cmd_passwd(args: argparse.Namespace) -> int:
    import getpass

    from mam.broker.passwords import set_password

    password = (
        getpass.getpass(f"password for {args.user}: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    )
    set_password(args.file, args.user, password)
    print(f"{args.user} set in {args.file}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    from mam.follow import follow_blocking, outcome_code, print_logged, stopped_following

    workspace = workspace_from_args(args)
    job = resolve_id(workspace, args.job_id)
    record = read_record_or_pruned(workspace, job)
    following = args.follow and not record.status.terminal
    if following and args.timestamps:
        raise UsageError(f"--timestamps prints what is logged so far; job {job} is {record.status.value}: "
                         f"follow it with `mam logs -f {job}` (--tail N may go with it)")
    if not following and (args.tail is not None or args.timestamps):
        _print_lines(workspace, job, args.tail, args.timestamps)
    elif following:
        try:
            record = follow_blocking(workspace, broker_from_args(args, workspace), job, from_log=True, tail=args.tail)
        except KeyboardInterrupt:
            print(f"\nmam: {stopped_following(job)}", file=sys.stderr)
            return 130
    else:
        print_logged(workspace, job)
    print(f"mam: job {record.job_id} {record.status.value}"
          + (f" (exit code {record.exit_code})" if record.exit_code is not None else ""), file=sys.stderr)
    for line in incomplete_lines(record):
        print(f"mam: {line}", file=sys.stderr)
    return outcome_code(record.status) if record.status.terminal else 0


def _print_lines(workspace: Workspace, job: str, count: int | None, timestamps: bool) -> None:
    """`--tail N` (the last N lines of the output) and `--timestamps` (each line after the time its
    output event was recorded, as `kubectl logs --timestamps` puts the time first)."""
    from mam.follow import write_output
    from mam.log_lines import logged_lines, tail

    for line in tail(logged_lines(workspace, job), count):
        write_output(line.stream, f"{line.recorded_at} {line.text}" if timestamps else line.text)


def cmd_schema(args: argparse.Namespace) -> int:
    from mam.schema import event_schema, render

    sys.stdout.write(render(event_schema(args.type)))
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from mam.up import run_up

    return run_up(args)


def build_parser() -> argparse.ArgumentParser:
    from mam.agents.cli import register as register_writers
    from mam.agents.input_cli import register as register_input
    from mam.cli_jobs import register as register_listings
    from mam.cli_prune import register as register_prune
    from mam.cli_review import register as register_review
    from mam.cli_usage import register as register_usage
    from mam.mcp_server.cli import register as register_mcp
    from mam.web.cli import register as register_dashboard

    parser = Parser(prog=PROG, description=__doc__)
    parser.add_argument("--version", action="version", version=f"mam {__version__}")
    add_verbose(parser, top=True)
    add_global(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from mam.up import add_arguments as add_up_arguments

    up = sub.add_parser("up", help="run the embedded broker and the projector for a workspace")
    add_up_arguments(up)
    up.set_defaults(handler=cmd_up)

    register_writers(sub)
    register_input(sub)
    register_dashboard(sub)
    register_mcp(sub)

    passwd = sub.add_parser("passwd", help="add or change a user in a broker password file")
    passwd.add_argument("file", type=Path, metavar="FILE")
    passwd.add_argument("user", metavar="USER")
    passwd.set_defaults(handler=cmd_passwd)

    ws = sub.add_parser("workspace", help="show the resolved workspace: root, id, dirs, broker")
    ws.add_argument("--json", action="store_true")
    add_workspace_args(ws)
    add_broker_arg(ws)
    ws.set_defaults(handler=cmd_workspace)

    register_listings(sub)
    register_completion(sub)
    register_usage(sub)
    register_prune(sub)
    register_review(sub)

    show = sub.add_parser("show", help="show one job's record")
    show.add_argument("job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it")
    show.add_argument("--json", action="store_true")
    add_workspace_args(show)
    add_broker_arg(show)
    show.set_defaults(handler=cmd_show)

    logs = sub.add_parser("logs", help="print a job's output; -f follows it live until the job ends")
    logs.add_argument("job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it")
    logs.add_argument("-f", "--follow", action="store_true", help="follow until the job ends; exit 0 only if it succeeded")
    logs.add_argument("--tail", type=non_negative_int, metavar="N", help="only the last N lines of the output")
    logs.add_argument("--timestamps", action="store_true",
                      help="start each line with the time its output was recorded (ISO 8601 UTC)")
    add_workspace_args(logs)
    add_broker_arg(logs)
    logs.set_defaults(handler=cmd_logs)

    rebuild = sub.add_parser(
        "rebuild", help="rebuild the registry from the audit log (stop the projector first, unless --verify)"
    )
    rebuild.add_argument(
        "--verify",
        action="store_true",
        help="change and create nothing, also while a projector runs; report records that differ (exit 1)",
    )
    rebuild.add_argument("--json", action="store_true")
    add_workspace_args(rebuild)
    rebuild.set_defaults(handler=cmd_rebuild)

    events = sub.add_parser("events", help="show one job's audit log")
    events.add_argument("job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it")
    events.add_argument("--json", action="store_true")
    add_workspace_args(events)
    events.set_defaults(handler=cmd_events)

    schema = sub.add_parser("schema", help="print the events' JSON Schema (draft 2020-12), as in docs/events.schema.json")
    schema.add_argument("--type", metavar="TYPE", help="only this event type's schema (self-contained)")
    schema.set_defaults(handler=cmd_schema)
    _verbose_everywhere(parser)
    suppress_in_subcommands(parser)
    return parser


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """`-v` in any position: on every subcommand (and theirs) that has none yet."""
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public walk of subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in action.choices.values():
                if "-v" not in child._option_string_actions:  # noqa: SLF001
                    add_verbose(child)
                _verbose_everywhere(child)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    complete_if_asked(parser)
    args = parser.parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        check_global(args, _top_defaults(parser))
        return args.handler(args)

    run_cli(PROG, body)


def _top_defaults(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The top parser's own defaults (what a global option is when not given)."""
    return argparse.Namespace(**{a.dest: a.default for a in parser._actions})  # noqa: SLF001
