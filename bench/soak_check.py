"""The soak's invariants, checked on the workspace's files once every process has stopped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from soak_load import Ack, RunnerJob
from soak_stack import child_env

from mam.client.logged_output import in_seq_order
from mam.registry import refusal_files

TERMINAL = {"succeeded", "failed", "cancelled", "timed_out", "lost"}
ORDER_WORDS = ("illegal transition", "a finished job never changes", "unknown job", "claim refused")
"""Refusals about an event's order (it came before, or after, what it depends on), never acceptable
for an acknowledged event."""


def reason_class(reason: str) -> str:
    """order, claim (two runners raced for a job: `expected_version` does not match), bound, other."""
    if any(word in reason for word in ORDER_WORDS):
        return "order"
    if "expected_version" in reason:
        return "claim"
    if "too many" in reason or "parked" in reason or "limit" in reason:
        return "bound"
    return "other"


@dataclass(frozen=True)
class Refusal:
    """One line of `_rejected.jsonl` that names an event."""

    event_id: str
    job_id: str
    kind: str
    """The refused event's type, from its payload excerpt ('?' when the excerpt does not say)."""
    reason: str


_TYPE = re.compile(r'"type"\s*:\s*"([a-z_]+)"')


def refused_type(excerpt: str) -> str:
    """The type of a refused event, from its payload excerpt (cut at 2 KiB, so maybe not JSON)."""
    found = _TYPE.search(excerpt or "")
    return found.group(1) if found else "?"


_EXITED = re.compile(r"job (\S+): exited with code (-?\d+)")
_ENDED_ELSEWHERE = re.compile(r"job (\S+): stopped; the registry had already ended it as (\w+)")


def runner_saw(logs: Iterable[Path]) -> dict[str, str]:
    """How each job ended as its runner saw it, from the runners' logs: `exit N`, or `ended by the registry
    (STATUS) while it ran` when the registry ended it first (the runner then stops the job)."""
    saw: dict[str, str] = {}
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        for job_id, code in _EXITED.findall(text):
            saw[job_id] = f"exit {code}"
        for job_id, status in _ENDED_ELSEWHERE.findall(text):
            saw[job_id] = f"ended by the registry ({status}) while it ran"
    return saw


@dataclass
class Files:
    """What the workspace holds: each job's log entries, the refusals, the parked events, the records."""

    logs: dict[str, list[dict]] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    parked: set[str] = field(default_factory=set)
    records: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def read(cls, root: Path) -> Files:
        files = cls()
        logs_dir, jobs_dir = root / ".mam" / "delegate_job_logs", root / ".mam" / "jobs"
        for path in logs_dir.glob("*/events.jsonl"):
            files.logs[path.parent.name] = [json.loads(line) for line in path.read_bytes().splitlines() if line]
        for entry in refusal_files.every(logs_dir):  # `_rejected.jsonl` and the files rotated out of it
            if entry.get("event_id"):
                files.rejected.setdefault(entry["event_id"], entry.get("reason", ""))
                files.refusals.append(
                    Refusal(
                        entry["event_id"],
                        entry.get("job_id") or "",
                        refused_type(entry.get("payload", "")),
                        entry.get("reason", ""),
                    )
                )
            elif entry.get("suppressed"):  # refusals past the log's rate: counted, not written; their kinds unknown
                files.refusals.append(
                    Refusal(
                        f"({entry['suppressed']} suppressed)",
                        entry.get("job_id") or "",
                        "suppressed",
                        entry.get("reason", ""),
                    )
                )
        for path in (logs_dir / "_parked").glob("*.jsonl"):
            for line in path.read_bytes().splitlines():
                try:
                    files.parked.add(json.loads(line)["event"]["id"])
                except (ValueError, KeyError, TypeError):
                    pass
        for path in jobs_dir.glob("*.json"):
            files.records[path.stem] = json.loads(path.read_bytes())
        return files

    def ids(self) -> Counter[str]:
        return Counter(e["event"].get("id") for entries in self.logs.values() for e in entries if e["event"].get("id"))


@dataclass
class Verdict:
    events: int = 0
    acked: int = 0
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    output_bad: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    open_jobs: list[str] = field(default_factory=list)
    runner_refused: list[str] = field(default_factory=list)
    """A runner's events (not its claims) refused: each was acknowledged to it and is not in the record."""
    outcome_bad: list[str] = field(default_factory=list)
    """Runner jobs recorded otherwise than their runner saw them end (exit 0 recorded as `lost`)."""
    rebuild: str = ""
    failures: list[str] = field(default_factory=list)


def check(
    root: Path,
    ws: str,
    acks: dict[str, Ack],
    jobs: dict[str, RunnerJob],
    synthetic: list[str],
    in_order: list[str],
    saw: dict[str, str] | None = None,
) -> Verdict:
    """The invariants over the workspace's files; `in_order`: synthetic jobs published in order; theirs and
    the runner jobs' outputs applied in another order are counted (`reordered`, a figure: a redelivery after a fault
    may reorder, which costs nothing while the job runs). `saw`: how each runner job ended as its runner saw
    it (`runner_saw`), for the runners that lived to the end."""
    files = Files.read(root)
    seen = files.ids()
    v = Verdict(events=sum(seen.values()), acked=len(acks))
    for reason in files.rejected.values():
        v.refused[reason_class(reason)] += 1
    for eid, ack in acks.items():
        if seen[eid] == 1:
            continue
        if seen[eid] > 1:
            continue  # counted with every doubled id below
        reason = files.rejected.get(eid)
        if reason is not None and reason_class(reason) != "order":
            continue
        why = f"refused for its order: {reason}" if reason else ("still parked" if eid in files.parked else "missing")
        v.lost.append(f"{ack.job}/{eid} ({ack.kind}): {why}")
    v.doubled = sorted(f"{eid} x{n}" for eid, n in seen.items() if n > 1)
    for job_id, job in jobs.items():
        problem = output_problem(files.logs.get(job_id, []), files.records.get(job_id), job)
        if problem:
            v.output_bad.append(f"{job_id}: {problem}")
    for job_id in [*in_order, *jobs]:
        seqs = [e["event"].get("seq") for e in files.logs.get(job_id, []) if e["event"].get("type") == "output"]
        if seqs != sorted(seqs):
            v.reordered.append(job_id)
    for job_id in [*jobs, *synthetic]:
        status = (files.records.get(job_id) or {}).get("status")
        if status not in TERMINAL:
            v.open_jobs.append(f"{job_id} ({status or 'no record'})")
    v.runner_refused = runner_refusals(files, jobs)
    v.outcome_bad = outcome_problems(files, saw or {})
    v.rebuild = rebuild_verify(root, ws)
    if v.lost:
        v.failures.append(f"{len(v.lost)} acknowledged events lost, e.g. " + "; ".join(v.lost[:5]))
    if v.doubled:
        v.failures.append(f"{len(v.doubled)} events doubled in the audit log, e.g. " + ", ".join(v.doubled[:5]))
    if v.output_bad:
        v.failures.append(
            f"{len(v.output_bad)} jobs' output incomplete or out of order, e.g. " + "; ".join(v.output_bad[:3])
        )
    if v.open_jobs:
        v.failures.append(f"{len(v.open_jobs)} jobs left open, e.g. " + ", ".join(v.open_jobs[:5]))
    if v.runner_refused:
        v.failures.append(
            f"{len(v.runner_refused)} events a runner published were refused, e.g. " + "; ".join(v.runner_refused[:3])
        )
    if v.outcome_bad:
        v.failures.append(
            f"{len(v.outcome_bad)} jobs recorded otherwise than their runner saw them end, e.g. "
            + "; ".join(v.outcome_bad[:3])
        )
    if v.rebuild:
        v.failures.append(f"mam rebuild --verify: {v.rebuild}")
    return v


def runner_refusals(files: Files, jobs: dict[str, RunnerJob]) -> list[str]:
    """The runner jobs' refused events, claims aside (two runners racing for a job, or a claim made from a
    stale state, lose nothing). Whatever a runner publishes after its claim the broker acknowledged (the
    projector received it), and the runner does not send it again: refused, it is gone from the record."""
    refused = {r.event_id: r for r in files.refusals if r.job_id in jobs and r.kind != "claimed"}  # once each
    return [f"{r.job_id}/{r.event_id} ({r.kind}): {r.reason}" for r in refused.values()]


def outcome_problems(files: Files, saw: dict[str, str]) -> list[str]:
    """Jobs whose record ends otherwise than their runner saw (`runner_saw`): exit 0 is `succeeded`, any other
    exit `failed`; a job the registry ended while its runner ran it is a problem whatever it is recorded as."""
    problems = []
    for job_id, seen in sorted(saw.items()):
        record = files.records.get(job_id) or {}
        status = record.get("status")
        expected = "succeeded" if seen == "exit 0" else "failed" if seen.startswith("exit ") else None
        if status != expected:
            why = f" ({record['error']})" if record.get("error") and status != "failed" else ""
            problems.append(f"{job_id}: {seen} on its runner, recorded {status or 'no record'}{why}")
    return problems


def output_problem(entries: list[dict], record: dict | None, job: RunnerJob) -> str:
    """Why the job's stdout, as `mam logs` prints it (by seq), is not what its script printed (all of
    it if it succeeded, a prefix if its runner died), or holds a seq twice; '' if it is right. The
    log's own order is arrival order: a redelivery may invert two outputs there (counted as
    `reordered`, a figure)."""
    outputs = in_seq_order(e["event"] for e in entries)  # as `mam logs` prints them
    seqs = [o.get("seq") for o in outputs if o.get("seq") is not None]
    if len(set(seqs)) != len(seqs):
        return f"an output seq twice in the log: {seqs[:20]}"
    text = "".join(o.get("text", "") for o in outputs if o.get("stream", "stdout") == "stdout")
    status = (record or {}).get("status")
    if status == "succeeded" and text != job.expected:
        return f"succeeded with {len(text)} of {len(job.expected)} bytes of output ({_first_missing(text, job)})"
    if status != "succeeded" and not job.expected.startswith(text):
        return f"{status}: its output is not a prefix of what it printed ({_first_missing(text, job)})"
    return ""


def _first_missing(text: str, job: RunnerJob) -> str:
    got, want = text.splitlines(), job.expected.splitlines()
    for i, line in enumerate(want):
        if i >= len(got) or got[i] != line:
            return f"first difference at line {i}: {line[:40]!r}"
    return "extra output"


def rebuild_verify(root: Path, ws: str) -> str:
    """'' when every record is the fold of its log; else what `mam rebuild --verify` said."""
    mam = str(Path(sys.executable).parent / "mam")
    done = subprocess.run(
        [mam, "rebuild", "--verify", "--workspace", str(root), "--workspace-id", ws],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    if done.returncode == 0:
        return ""
    return f"exit {done.returncode}: " + " | ".join((done.stdout + done.stderr).strip().splitlines()[:4])
