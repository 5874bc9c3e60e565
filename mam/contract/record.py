"""The job record: the registry file and the retained `state` payload."""

from __future__ import annotations

from enum import Enum
from typing import Final

import msgspec
from msgspec import UNSET, Struct, UnsetType

from mam.contract.event_parts import GitInfo, Usage
from mam.contract.nesting import decode


class Status(str, Enum):
    SUBMITTED = "submitted"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    BLOCKED = "blocked"
    """Waits for the jobs it names in `after` to succeed; not claimable yet."""
    RETRYING = "retrying"
    """An attempt ended in an outcome the job's policy retries: the projector at once derives the
    `retrying` event that submits it again (so a record is seen in this status only between them)."""
    WAITING = "waiting"
    """A running job asked a person a question (`input_requested`) and waits for the answer: its lease
    and its timeout do not run meanwhile."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL: Final = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.LOST})


class Attempt(Struct, frozen=True, kw_only=True):
    """How one attempt of a job with a retry policy ended."""

    attempt: int
    status: Status
    runner: str | None = None
    claimed_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    error: str | None = None
    outputs_expected: int | UnsetType = UNSET
    """The attempt's output accounting (`JobRecord.outputs_expected`, `outputs_missing`); absent when unknown."""
    outputs_missing: list[tuple[int, int]] | UnsetType = UNSET
    released: bool | UnsetType = UNSET
    """True for an attempt its runner gave back unfinished (`released`): `status` is then the one the job
    had when released (claimed, running, waiting) and `error` the runner's reason. Absent otherwise, and a
    known status, so readers that predate it still decode the record."""


class JobRecord(Struct, frozen=True, kw_only=True):
    """One job as the projector folds it. Field order is the file's key order."""

    job_id: str
    workspace: str
    status: Status
    agent: str
    agent_session: str | None = None
    role: str | None = None
    prompt: str
    labels: dict[str, str] = {}
    parent: str | None = None
    timeout: float | None = None
    submitted_at: str
    claimed_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    runner: str | None = None
    exit_code: int | None = None
    result: str | None = None
    error: str | None = None
    version: int = 0
    last_event_id: str | None = None
    updated_at: str
    cancel_requested_at: str | None = None
    cancel_reason: str | None = None
    progress: str | None = None
    percent: float | None = None
    last_heartbeat_at: str | None = None
    output_bytes: int = 0
    runner_epoch: str | None = None
    git_at_submit: GitInfo | None = None
    git_at_finish: GitInfo | None = None
    last_seen_at: str | None = None
    """When the projector last received a sign of life for the job (claimed, started, progress,
    output, heartbeat): its lease counts from here."""
    # The job's options (`mam.contract.job_options.JobOptions`, copied from its `submitted` by
    # `job_options.given`), each at the place its key has always had in the file, each absent when not given so
    # older records keep their bytes; tests/codebase/test_option_declared_once.py holds them to `JobOptions`.
    retries: int | UnsetType = UNSET
    """Retry policy (see docs/design/contract.md, Retries): further attempts allowed, outcomes that retry,
    first backoff in seconds."""
    retry_on: list[str] | UnsetType = UNSET
    backoff: float | UnsetType = UNSET
    attempt: int | UnsetType = UNSET
    """The attempt now under way (1 when absent)."""
    attempts: list[Attempt] | UnsetType = UNSET
    """Each ended attempt's outcome, oldest first (jobs with a retry policy)."""
    not_before: str | UnsetType = UNSET
    """The retry's backoff: no claim is taken before this time."""
    retry_of: str | UnsetType = UNSET
    """The finished job this one resubmits (`mam retry`)."""
    permissions: str | UnsetType = UNSET
    after: list[str] | UnsetType = UNSET
    question: str | UnsetType = UNSET
    """The last question the job asked a person (`input_requested`), kept after it was answered; the
    keys below are absent until a job asks, so older records keep their bytes."""
    choices: list[str] | UnsetType = UNSET
    """The answers the question allows (absent: any answer)."""
    question_id: str | UnsetType = UNSET
    """The id of the `input_requested` event that asked it: `mam ask` waits for the answer to this one."""
    asked_at: str | UnsetType = UNSET
    answer: str | UnsetType = UNSET
    """The answer (`input_provided`); absent while the job waits, or when the question was withdrawn."""
    resumed_at: str | UnsetType = UNSET
    """When the job last stopped waiting (answered or withdrawn): its lease counts from here at the earliest."""
    waited: float | UnsetType = UNSET
    """Seconds the job spent waiting for answers, all questions together: its timeout does not count them."""
    usage: Usage | UnsetType = UNSET
    """What the agent reported it used (cost, tokens, turns, its session id), from the job's terminal
    event; absent from the file when it reported nothing, so older records keep their bytes."""
    denials: list[str] | UnsetType = UNSET
    """The tool calls the agent's CLI refused at the job's permission level (Claude Code's
    `permission_denials`), from the job's `succeeded` or `failed`; absent when it reported none."""
    cancel_tree: bool | UnsetType = UNSET
    """Its cancel request asked for its whole delegation tree (`mam cancel --tree`): every unfinished job
    under it is cancelled too, each with a reason naming it (absent otherwise)."""
    output_seqs: list[tuple[int, int]] | UnsetType = UNSET
    """The `seq`s of this attempt's output events the log holds, as [first, last] ranges ([[0, 41]]: all
    of 0..41). Set to [] when an attempt is claimed or started (so a job that ran before this key existed
    is never accounted from the middle), cleared when the job is retried (`mam.contract.output_accounting`)."""
    outputs_expected: int | UnsetType = UNSET
    """The `outputs` the attempt's terminal event gave: how many output events its runner published."""
    outputs_missing: list[tuple[int, int]] | UnsetType = UNSET
    """The seqs below `outputs_expected` the log does not hold, as [first, last] ranges; [] when it holds
    them all. Absent unless both the count and the seqs were known."""
    start_inferred: bool | UnsetType = UNSET
    """True when the attempt's start is the projector's inference (`started.inferred`): its runner's numbered
    outputs or outcome came without its `started` (`mam.contract.inferred_start`); `started_at` is then when
    the projector inferred it. Absent otherwise, and cleared when the job is retried."""
    pruned_at: str | UnsetType = UNSET
    """When the job was pruned (`pruned`): such a record is never a registry file; it is the last state
    published for the job (its retained state is then cleared) and the fold of its archived log."""
    runner_key: str | UnsetType = UNSET
    """The public key the claim of the current attempt named (`claimed.runner_key`, base64): the runner's
    events and will for this job count only signed by it (docs/design/runners.md, Runner identity). Absent for a
    job claimed by a runner that does not sign (unprotected), and cleared when the job is retried."""
    requeue: bool | UnsetType = UNSET
    """False when the job was submitted with `--no-requeue`; absent otherwise (the default: released)."""
    resumes: str | UnsetType = UNSET
    """The job whose agent session this one continues (`submitted.resumes`); the keys below are each absent
    unless given at submit, so older records keep their bytes (`mam.contract.job_limits`)."""
    resume_session: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    max_turns: int | UnsetType = UNSET
    budget_tokens: int | UnsetType = UNSET
    budget_usd: float | UnsetType = UNSET
    tree_budget_tokens: int | UnsetType = UNSET
    tree_budget_usd: float | UnsetType = UNSET
    require: dict[str, str] | UnsetType = UNSET
    priority: int | UnsetType = UNSET
    """Absent means 0 (`rank`)."""
    resume_root: str | UnsetType = UNSET
    """The first job of the conversation a resumed job continues (`submitted.resume_root`): a `--worktree`
    runner runs it in that job's worktree path (mam/git/conversation_tree.py)."""
    resume_usage: Usage | UnsetType = UNSET
    """The tokens the conversation's earlier jobs recorded (`submitted.resume_usage`); absent unless resumed."""
    parent_close: str | UnsetType = UNSET
    """Absent when not given, which is `cancel` (`mam.contract.parent_close`)."""


def rank(record: JobRecord) -> int:
    """The job's place in the queue, higher first: the `priority` it was submitted with, else 0."""
    return record.priority if isinstance(record.priority, int) else 0


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(JobRecord)


def encode_record(record: JobRecord) -> bytes:
    """The record's canonical bytes: stable key order, one trailing newline."""
    return _encoder.encode(record) + b"\n"


def decode_record(data: bytes) -> JobRecord:
    """A record (a file, or a retained state from the broker): any JSON too deep raises `msgspec.DecodeError`."""
    return decode(_decoder, data)
