"""`mam show JOB`'s view, as `kubectl describe` reads: what a person needs about one job, one `Label:` a line.

Status and why, agent and runner, times, outcome, result, git, usage, the delegation tree and the last
lines of the output; the plumbing (version, event ids, epochs, output accounting, keys) is for
`mam show -o json|yaml`. Pure: `describe(record, related, now)` gives the lines; what it needs besides
the record (the parent, the children, the output's tail, why a queued job waits) is gathered by
`mam.cli.describe_reads`. Everything a client chose is printed through `safe`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from mam.cli import describe_parts as part
from mam.contract import job_options
from mam.contract.attempts import attempt_of
from mam.contract.event_parts import Usage
from mam.contract.humanize import ago, between, parse_time, span
from mam.contract.job_options import ABOUT
from mam.contract.output_accounting import incomplete_lines
from mam.contract.record import JobRecord, Status
from mam.contract.routing import describe as pairs
from mam.contract.terminal import safe, short

WIDTH: Final = 14
"""The label column: `Permissions:` and a space or two."""
LONG: Final = 20
"""At most this many lines of a prompt or a result; `-o json` has the rest."""
OUTPUT_TAIL: Final = 10
"""The output lines shown: the last ten, as `kubectl logs --tail` would be asked."""
LINE: Final = 400
"""An output line longer than this is cut (a minified file, a progress bar redrawn with carriage returns)."""
CHILDREN: Final = 20
"""At most this many children listed; `mam jobs tree JOB` has them all."""

Paint = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Related:
    """What the view shows besides the record itself, read by `mam.cli.describe_reads`."""

    parent: str | None = None
    """The parent's status (`succeeded`), or a few words on why it is not known."""
    children: list[JobRecord] = field(default_factory=list)
    """The newest `CHILDREN` jobs it delegated, oldest first."""
    children_total: int = 0
    after: dict[str, str] = field(default_factory=dict)
    """Each job of its `--after` and that job's status."""
    output: list[str] = field(default_factory=list)
    """The output's last lines, each without its newline."""
    output_lines: int = 0
    output_note: str | None = None
    """Why the output could not be read (its log is not on this machine, say)."""
    queue_note: str | None = None
    """Why a queued job waits, from the runners online (`mam.cli.show_routing`); None when not asked."""
    archived_log: Path | None = None
    """Where a pruned job's log is."""


def describe(record: JobRecord, related: Related, now: datetime, paint: Paint = lambda status: status) -> list[str]:
    """The view's lines; `paint` colours the status word (on a terminal without NO_COLOR / --no-color)."""
    out: list[str] = []
    job = record.job_id

    def put(label: str, value: str | None, *, layout: bool = False) -> None:
        if value is None or value == "":
            return
        lines = (safe(value) if layout else safe(value, keep_layout=False)).replace("\t", "    ").split("\n")
        if len(lines) > LONG:
            more = len(lines) - LONG
            lines = [*lines[:LONG], f"... {more} more line{'s' * (more != 1)}: mam show {job} -o json has all of it"]
        out.append(f"{label + ':':<{WIDTH}}{lines[0]}".rstrip())
        out.extend(f"{'':<{WIDTH}}{line}".rstrip() for line in lines[1:])

    put("Job", job)
    out.append(f"{'Status:':<{WIDTH}}{paint(record.status.value)}{_status_note(record)}")
    reason = _reason(record, related, now)
    put("Reason", reason, layout=True)
    put("Exit", part.exit_line(record, reason) if record.status.terminal else None)
    put("Agent", record.agent)
    put("Runner", record.runner)
    put("Session", " ".join(x for x in (record.agent_session, f"(role {record.role})" if record.role else "") if x))
    put("Prompt", record.prompt.rstrip("\n"), layout=True)
    _settings(record, put)
    _times(record, now, put)
    put("Progress", _progress(record) if not record.status.terminal else None)
    put("Result", (record.result or "").rstrip("\n"), layout=True)
    _question(record, put)
    put(
        "Denied",
        "\n".join(safe(d, keep_layout=False) for d in record.denials) if isinstance(record.denials, list) else None,
        layout=True,
    )
    attempts = record.attempts if isinstance(record.attempts, list) else []
    if any(a.attempt != attempt_of(record) for a in attempts):  # not only the one the lines above describe
        put("Attempts", "\n".join(part.attempt_line(a) for a in attempts), layout=True)
    put("Usage", part.usage_line(record.usage) if isinstance(record.usage, Usage) else None)
    put("Git", "\n".join(part.git_lines(record)), layout=True)
    if isinstance(record.pruned_at, str):
        put("Pruned", part.when(record.pruned_at, now))
        if related.archived_log is not None:
            put("Archived log", f"{related.archived_log} (`mam events {job}` reads it, `mam logs {job}` its output)")
    _tree(record, related, put, out, paint)
    _output(record, related, out)
    return out


def _status_note(record: JobRecord) -> str:
    """After the status word: tool calls denied, a cancel on its way."""
    count = len(record.denials) if isinstance(record.denials, list) else 0
    if record.status in (Status.SUCCEEDED, Status.FAILED) and count:
        return f"  ({count} tool call{'s' if count != 1 else ''} denied at its permission level)"
    if record.cancel_requested_at and not record.status.terminal:
        return "  (cancel requested)"
    return ""


def _reason(record: JobRecord, related: Related, now: datetime) -> str | None:
    """Why the job is where it is: what a queued or blocked job waits for, why a finished one ended so."""
    status = record.status
    if status.terminal:
        return part.outcome_reason(record)
    if record.cancel_requested_at:
        return f"cancel requested {ago(record.cancel_requested_at, now)}: {record.cancel_reason or 'on request'}"
    if status is Status.BLOCKED:
        waits = ", ".join(f"{dep} ({related.after.get(dep, 'not found')})" for dep in record.after or [])
        return f"waits for {waits} to succeed (--after)"
    if status is Status.RETRYING:
        return "its attempt ended in an outcome it retries: it is being submitted again"
    if status is Status.CLAIMED:
        return f"claimed by {record.runner or 'a runner'}, starting"
    if status is Status.WAITING:
        return f"waits for a person to answer its question: mam answer {record.job_id} TEXT"
    if status is Status.SUBMITTED:
        until = record.not_before if isinstance(record.not_before, str) else None
        backoff = parse_time(until)
        if backoff is not None and backoff > now:
            return (
                f"retry backoff: no runner takes it before {part.local_time(until)} "
                f"(in {span((backoff - now).total_seconds())})"
            )
        return related.queue_note or (
            f"queued: waiting for a runner for {record.agent!r} (no broker answered, so "
            "which runners are online is not known; `mam agents` lists them)"
        )
    return None


SETTINGS: Final = ("Requires", "Priority", "Permissions", "Model", "Limits")
"""The lines of what a job asked for, in order; each option says which line is its (`job_options.ABOUT`)."""


def _settings(record: JobRecord, put: Callable[..., None]) -> None:
    """What the job asked for beyond its prompt, each only when given."""
    put("Labels", ", ".join(f"{k}={v}" for k, v in sorted(record.labels.items())))
    said: dict[str, list[str]] = {line: [] for line in SETTINGS}
    if record.timeout is not None:
        said["Limits"].append(f"runs at most {span(record.timeout)}")
    switches = []  # a switch's note goes after the limits
    for name, option in ABOUT.items():
        value = job_options.value(record, name)
        if option.show is None or value is None or value == option.default:
            continue
        line, words = option.show
        if isinstance(value, bool):
            switches.append(words)
        else:
            said[line].append(pairs(value) if isinstance(value, dict) else words.format(value))
    said["Limits"] += switches
    for line in SETTINGS:
        put(line, "; ".join(said[line]))
    put("Retries", part.retry_policy(record))


def _times(record: JobRecord, now: datetime, put: Callable[..., None]) -> None:
    """Submitted, started and finished, each in the one local form with its age; how long it queued and ran."""
    put("Submitted", part.when(record.submitted_at, now))
    if record.started_at:
        queued = part.took(record.submitted_at, record.started_at)
        running = [] if record.finished_at else [f"running for {between(record.started_at, None, now)}"]
        inferred = ["inferred from its output"] if record.start_inferred is True else []
        put(
            "Started",
            part.when(record.started_at, None, *([f"queued {queued}"] if queued else []), *running, *inferred),
        )
    if record.finished_at:
        ran = part.took(record.started_at, record.finished_at)
        waited = record.waited if isinstance(record.waited, float | int) and record.waited >= 1 else 0
        said = f"ran {ran}" + (f", {span(waited)} of it waiting for answers" if waited and ran else "")
        put("Finished", part.when(record.finished_at, now, *([said] if ran else [])))


def _progress(record: JobRecord) -> str | None:
    percent = f"{record.percent:g}%" if record.percent is not None else ""
    return " ".join(x for x in (percent, record.progress or "") if x) or None


def _question(record: JobRecord, put: Callable[..., None]) -> None:
    if not isinstance(record.question, str):
        return
    choices = f"  (choices: {', '.join(record.choices)})" if isinstance(record.choices, list) else ""
    put("Question", record.question.rstrip("\n") + choices, layout=True)
    if isinstance(record.answer, str):
        put("Answer", record.answer, layout=True)


def _tree(record: JobRecord, related: Related, put: Callable[..., None], out: list[str], paint: Paint) -> None:
    """The delegation tree around the job: its parent, the jobs it waits for or continues, its children."""
    if record.parent:
        close = (
            "; it runs on if its parent ends first (--parent-close abandon)" if record.parent_close == "abandon" else ""
        )
        put("Parent", f"{record.parent} ({related.parent or 'unknown'}){close}")
    put("Retry of", record.retry_of if isinstance(record.retry_of, str) else None)
    put("Resumes", record.resumes if isinstance(record.resumes, str) else None)
    if record.after and record.status is not Status.BLOCKED:
        put("After", ", ".join(f"{dep} ({related.after.get(dep, 'not found')})" for dep in record.after))
    if not related.children_total:
        return
    shown = len(related.children)
    more = f"{shown} newest of {related.children_total}; " if shown < related.children_total else ""
    put("Children", f"{related.children_total} ({more}the whole tree: mam jobs tree {record.job_id})")
    rows = [(c.job_id, c.status.value, c.agent, short(c.prompt, 60)) for c in related.children]
    widths = [max(len(safe(row[i], keep_layout=False)) for row in rows) for i in range(3)]
    for child_id, status, agent, prompt in rows:
        cells = [
            safe(child_id, keep_layout=False).ljust(widths[0]),
            paint(status) + " " * (widths[1] - len(status)),
            safe(agent, keep_layout=False).ljust(widths[2]),
        ]
        out.append(f"  {'  '.join(cells)}  {prompt}".rstrip())


def _output(record: JobRecord, related: Related, out: list[str]) -> None:
    """The output's last lines, as `mam logs` prints them, after a line saying how to see it all."""
    job = record.job_id
    missing = incomplete_lines(record)
    if related.output_note:
        out.append(f"{'Output:':<{WIDTH}}{safe(related.output_note, keep_layout=False)}")
        out.extend(f"{'':<{WIDTH}}{line}" for line in missing)
        return
    if not related.output_lines and not missing:
        if record.status not in (Status.SUBMITTED, Status.BLOCKED, Status.CLAIMED):
            out.append(f"{'Output:':<{WIDTH}}{'none' if record.status.terminal else 'none yet'}")
        return
    total = related.output_lines
    if total > len(related.output):
        said = f"the last {len(related.output)} of {total} lines (all of it: mam logs {job})"
    else:
        said = f"{total} line{'s' * (total != 1)} (mam logs {job} prints it)"
    out.append(f"{'Output:':<{WIDTH}}{said}")
    out.extend(f"{'':<{WIDTH}}{line}" for line in missing)
    out.extend(f"  {_cut(safe(line.expandtabs(4), keep_layout=False))}".rstrip() for line in related.output)


def _cut(line: str, width: int = LINE) -> str:
    return line if len(line) <= width else f"{line[:width]}... ({len(line) - width} more characters)"


__all__ = ["CHILDREN", "OUTPUT_TAIL", "Related", "describe"]
