"""Output accounting in the pure fold: which of an attempt's output events the log holds, and, once
its runner said how many it published, which are missing (docs/design/contract.md, Events: output accounting).

A runner numbers an attempt's `output` events 0, 1, 2, ... (`seq`), says so in its `started`
(`counts_outputs`) and gives their number in the attempt's terminal event (`outputs`). The record keeps the seqs it folded as ranges (`output_seqs`;
one range while nothing is lost, so it stays small) and, at the end, the ranges below `outputs` it
never saw (`outputs_missing`). A loss anywhere on the way (a broker's queue limit, a bug) is then
in the record, and `mam show`, `mam logs` and the dashboard say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.attempts import attempt_of, attempts_of
from mam.contract.record import JobRecord

Ranges = list[tuple[int, int]]

SHOWN_RANGES: Final = 8
"""How many missing ranges a reader names before "and N more"."""


def add_seq(ranges: Sequence[tuple[int, int]], seq: int) -> Ranges:
    """`ranges` (sorted, disjoint, not adjacent) with `seq` in it. The usual case, the next seq in
    order, extends the last range; anything else (a gap, a late one, a repeat) merges in order."""
    if ranges and ranges[-1][1] + 1 == seq:
        return [*ranges[:-1], (ranges[-1][0], seq)]
    merged: Ranges = []
    for first, last in sorted([*ranges, (seq, seq)]):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def gaps(ranges: Sequence[tuple[int, int]], expected: int) -> Ranges:
    """The seqs in 0 .. expected-1 that `ranges` lacks, as ranges."""
    missing: Ranges = []
    at = 0
    for first, last in ranges:
        if first >= expected:
            break
        if first > at:
            missing.append((at, first - 1))
        at = max(at, last + 1)
    if at < expected:
        missing.append((at, expected - 1))
    return missing


def account(record: JobRecord, event: ev.AnyEvent) -> JobRecord:
    """`record` is the fold's result of `event`: start the attempt's accounting at a `started` that
    says its runner counts (`counts_outputs`), add an output's seq, or close it with the terminal
    event's count. Only events that say so start it, so a log written before these keys folds to
    the records it made then (`mam rebuild --verify`)."""
    seqs = record.output_seqs
    if isinstance(event, ev.Started) and event.counts_outputs is True:
        return record if isinstance(seqs, list) else replace(record, output_seqs=[])
    if isinstance(event, ev.Output):
        if event.seq is None or not isinstance(seqs, list):
            return record
        return replace(record, output_seqs=add_seq(seqs, event.seq))
    if isinstance(event, (ev.Succeeded, ev.Failed, ev.TimedOut, ev.Cancelled)) and isinstance(event.outputs, int):
        if not isinstance(seqs, list):  # its start was folded before seqs were kept: only the count is known
            return replace(record, outputs_expected=event.outputs)
        return replace(record, outputs_expected=event.outputs, outputs_missing=gaps(seqs, event.outputs))
    return record


def fills_gap(record: JobRecord, event: ev.AnyEvent) -> bool:
    """Whether `event` is an output of a finished job that its record names as missing: a broker's
    redelivery (NATS after its `ack_wait`, a restarted session) can bring one after the outcome that
    counts it has been applied at the `--settle-outputs` bound."""
    missing = record.outputs_missing
    return (
        isinstance(event, ev.Output)
        and isinstance(event.seq, int)
        and record.status.terminal
        and isinstance(missing, list)
        and any(first <= event.seq <= last for first, last in missing)
    )


def fill_gap(record: JobRecord, event: ev.Output) -> JobRecord:
    """`record` with the late output of `fills_gap` counted (its seq, its bytes), nothing else changed:
    the job stays as it ended, and the record names only what is still missing."""
    assert isinstance(event.seq, int) and isinstance(record.outputs_expected, int)
    seqs = add_seq(record.output_seqs if isinstance(record.output_seqs, list) else [], event.seq)
    missing = gaps(seqs, record.outputs_expected)
    history = attempts_of(record)
    if history and history[-1].attempt == attempt_of(record):  # the ended attempt's copy of its accounting
        history = [*history[:-1], replace(history[-1], outputs_missing=missing)]
    filled = replace(
        record, output_seqs=seqs, outputs_missing=missing, output_bytes=record.output_bytes + len(event.text.encode())
    )
    return replace(filled, attempts=history) if history else filled


def count(ranges: Sequence[tuple[int, int]]) -> int:
    return sum(last - first + 1 for first, last in ranges)


def seq_list(ranges: Sequence[Sequence[int]], shown: int = SHOWN_RANGES) -> str:
    """`4, 7, 10-12`, with "and N more ranges" past the first `shown`."""
    words = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:shown]]
    more = len(ranges) - shown
    return ", ".join(words) + (f" and {more} more range{'s' * (more != 1)}" if more > 0 else "")


def incomplete(expected: object, missing: object) -> str | None:
    """The plain sentence for an attempt's accounting, or None when its log holds every output
    event (or nothing is known): `output incomplete: 2 of 10 output events missing (seq 4, 7)`."""
    if not isinstance(expected, int) or not isinstance(missing, list) or not missing:
        return None
    ranges = [(int(a), int(b)) for a, b in missing]
    return f"output incomplete: {count(ranges)} of {expected} output events missing (seq {seq_list(ranges)})"


def incomplete_lines(record: JobRecord) -> list[str]:
    """What `mam show` and `mam logs` say about missing output, one line each: the record's own
    (its last attempt), and before it any earlier attempt's of a retried job."""
    lines = []
    for attempt in attempts_of(record):
        if attempt.attempt == attempt_of(record):
            continue  # the attempt the record's own keys describe
        said = incomplete(attempt.outputs_expected, attempt.outputs_missing)
        if said is not None:
            lines.append(f"attempt {attempt.attempt}: {said}")
    said = incomplete(record.outputs_expected, record.outputs_missing)
    if said is not None:
        lines.append(said)
    return lines
