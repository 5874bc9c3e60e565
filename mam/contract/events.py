"""The event schema: one msgspec Struct per type, a tagged union on `type`.

Decode once at the edge with `decode_event`; past it nothing handles dicts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal, Union, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from mam.contract.event_parts import Denials, GitInfo, Outputs, ShortText, Usage, Version
from mam.contract.ids import AGENT_ID_PATTERN, END, JOB_ID_PATTERN
from mam.contract.nesting import MAX_NESTING, nesting_error
from mam.contract.payload_checks import EventError, ignored_note, refuse_duplicate_keys

SCHEMA_VERSION: Final = 1
MAX_PAYLOAD_BYTES: Final = 1024 * 1024
TIMESTAMP_PATTERN: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?" + END
)
"""The timestamps the decoder takes (msgspec's datetime grammar): RFC 3339's date-time, and also a space
for the `T` (Python's `str(datetime)`), an offset without its colon (`date +%z`) and no offset at all
(read as UTC). The published schema gives this pattern, so schema and decoder agree on the form; only
the calendar (a 30 February, hour 24) is left to the decoder, which refuses it."""
TIMESTAMP_DESCRIPTION: Final = (
    "An RFC 3339 date-time such as 2026-12-04T12:00:00Z; also taken: a space for T, an offset "
    "without its colon (+0100), no offset (read as UTC)."
)
"""Events larger than this are refused before they are parsed."""

EventId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9._:-]{1,128}" + END)]
JobId = Annotated[str, Meta(pattern=JOB_ID_PATTERN)]
AgentName = Annotated[str, Meta(pattern=AGENT_ID_PATTERN)]
Text = Annotated[str, Meta(max_length=64 * 1024)]
Prompt = Annotated[str, Meta(min_length=1, max_length=512 * 1024)]
LABEL_KEY_PATTERN: Final = r"^[A-Za-z0-9._/-]{1,64}" + END
Labels = Annotated[
    dict[Annotated[str, Meta(pattern=LABEL_KEY_PATTERN)], Annotated[str, Meta(max_length=256)]],
    Meta(max_length=64),
]
Requirements = Annotated[
    dict[Annotated[str, Meta(pattern=LABEL_KEY_PATTERN)], Annotated[str, Meta(max_length=256)]],
    Meta(min_length=1, max_length=32),
]
"""Runner labels a job needs (`require`): key -> value, every pair must be among the runner's `labels`."""
MIN_PRIORITY: Final = -1000
MAX_PRIORITY: Final = 1000
Priority = Annotated[int, Meta(ge=MIN_PRIORITY, le=MAX_PRIORITY)]
Seconds = Annotated[float, Meta(gt=0, le=31 * 24 * 3600)]
ExitCode = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
"""A process exit status or a negated signal number: a 32-bit int on every platform."""
Pid = Annotated[int, Meta(ge=0, le=2**31 - 1)]
RetryOutcome = Literal["failed", "lost", "timed_out"]
PermissionLevel = Literal["read-only", "edit", "full"]
"""What a job's agent may do, least first (`mam.agents.permissions`): read only, edit files in the job's
working directory, or everything its CLI allows without asking."""
"""The outcomes of an attempt a retry policy may retry."""
ParentClose = Literal["cancel", "abandon"]
"""What becomes of a job when its parent ends first (`mam.contract.parent_close`)."""
MAX_RETRIES: Final = 100
MAX_BACKOFF: Final = 3600.0
MAX_RELEASES: Final = 100
MAX_TURNS: Final = 10_000
MODEL_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}" + END
ModelName = Annotated[str, Meta(pattern=MODEL_PATTERN)]
"""A model name or alias as agent CLIs take it (`sonnet`, `gpt-5-codex`, `gemini-2.5-pro`): one argument, no
leading dash, so it can never be read as another option."""
"""A job is released back to the queue (`released`) at most this many times; then its runner ends it `failed`."""


Retries = Annotated[int, Meta(ge=0, le=MAX_RETRIES)]
RetryOn = Annotated[list[RetryOutcome], Meta(min_length=1, max_length=3)]
Backoff = Annotated[float, Meta(ge=0, le=MAX_BACKOFF)]
After = Annotated[list[JobId], Meta(max_length=64)]
MaxTurns = Annotated[int, Meta(ge=1, le=MAX_TURNS)]
Tokens = Annotated[int, Meta(ge=1, le=2**53 - 1)]
Dollars = Annotated[float, Meta(gt=0, le=1e9)]
"""The bounds of the job options `Submitted` carries, named so `mam.contract.job_spec` reuses them."""


# Each event type repeats `frozen=True`: msgspec inherits it at run time, but type checkers read a Struct as a
# PEP 681 dataclass transform, which does not, and mypy refuses a non-frozen child of a frozen base
# (msgspec's recommended fix: github.com/msgspec/msgspec/issues/657).
class Event(Struct, frozen=True, kw_only=True, tag_field="type"):
    """The envelope every event carries.

    Fields this release does not know are read and ignored (here and in `GitInfo`, `Usage`): a runner
    one release newer may add an optional field without a new `v`, and this projector still takes its
    events (docs/design/contract.md, Events: how events evolve). The published schema stays strict
    (`additionalProperties: false`): it says what a publisher of this release sends."""

    v: Literal[1] = SCHEMA_VERSION
    id: EventId | None = None
    ts: datetime | None = None
    by: ShortText | None = None
    job_id: JobId | None = None
    expected_version: Version | None = None
    sig: Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]{86}" + END)] | UnsetType = UNSET
    """The signature of the runner that claimed the job (`mam.contract.identity`): always the payload's last member,
    over the bytes before it. Left out by every other publisher; the projector strips it once checked."""


RunnerKeyText = Annotated[str, Meta(pattern=r"^[A-Za-z0-9+/]{43}=" + END)]
"""An ed25519 public key: its raw 32 bytes, standard base64."""


class Submitted(Event, tag="submitted", frozen=True):
    prompt: Prompt
    agent: AgentName
    agent_session: ShortText | None = None
    role: ShortText | None = None
    labels: Labels = {}
    timeout: Seconds | None = None
    parent: JobId | None = None
    git: GitInfo | None = None
    # The job's options (`mam.contract.job_options.JobOptions`: what each means, its help and flag), each at the
    # place its key has always had in the event's bytes; tests/codebase/test_option_declared_once.py holds them
    # to `JobOptions`, and a new one goes at the end.
    retries: Retries | None | UnsetType = UNSET
    retry_on: RetryOn | None | UnsetType = UNSET
    backoff: Backoff | None | UnsetType = UNSET
    after: After | None | UnsetType = UNSET
    retry_of: JobId | None | UnsetType = UNSET
    """The finished job this one resubmits (`mam retry`)."""
    permissions: PermissionLevel | UnsetType = UNSET
    requeue: bool | UnsetType = UNSET
    resumes: JobId | UnsetType = UNSET
    """The finished job whose agent session this one continues (`mam submit --resume JOB`)."""
    resume_session: ShortText | UnsetType = UNSET
    """That job's `usage.agent_session_id`: the runner passes it to the agent's CLI (claude `--resume`, ...)."""
    model: ModelName | UnsetType = UNSET
    max_turns: MaxTurns | UnsetType = UNSET
    budget_tokens: Tokens | UnsetType = UNSET
    budget_usd: Dollars | UnsetType = UNSET
    tree_budget_tokens: Tokens | UnsetType = UNSET
    tree_budget_usd: Dollars | UnsetType = UNSET
    require: Requirements | UnsetType = UNSET
    priority: Priority | UnsetType = UNSET
    resume_root: JobId | UnsetType = UNSET
    """The first job of the conversation (the end of the `resumes` chain): a `--worktree` runner runs this
    job in that job's worktree path, where the agent's CLI keeps the session (Claude Code, Gemini CLI)."""
    resume_usage: Usage | UnsetType = UNSET
    """The tokens the conversation's earlier jobs recorded (summed along `resumes`): a CLI that reports the
    session's running total after a resume (Codex) has them subtracted, so the job records its own."""
    parent_close: ParentClose | UnsetType = UNSET


class Claimed(Event, tag="claimed", frozen=True):
    runner: AgentName
    epoch: Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]{1,64}" + END)] | None = None
    runner_key: RunnerKeyText | UnsetType = UNSET
    """The claiming runner instance's public key: every later event of the job's runner (started, progress,
    output, heartbeat, its outcome) and its will must be signed by it (docs/design/runners.md, Runner identity).
    Left out by a runner that does not sign: its job keeps the old, unprotected behaviour."""


class Started(Event, tag="started", frozen=True):
    runner: AgentName | None = None
    pid: Pid | None = None
    counts_outputs: bool | UnsetType = UNSET
    """True from a runner that numbers this attempt's `output` events from 0 and gives their number in its
    terminal event (`outputs`): the projector then accounts them. Left out otherwise, so a job started
    without it (a hand-published one, or one in a log from before this field) folds to the bytes it had."""
    inferred: bool | UnsetType = UNSET
    """True only on a `started` the projector derives: the job's claim was recorded and its runner's numbered
    outputs or outcome came, its `started` did not (lost by a broker, or late); see `mam.contract.inferred_start`.
    A runner leaves it out."""


class Progress(Event, tag="progress", frozen=True):
    message: Text | None = None
    percent: Annotated[float, Meta(ge=0, le=100)] | None = None


class Output(Event, tag="output", frozen=True):
    text: Text
    stream: Literal["stdout", "stderr"] = "stdout"
    seq: Version | None = None
    """The runner numbers an attempt's output events 0, 1, 2, ... over both streams; the terminal
    event's `outputs` says how many there were, so the fold can name any that never arrived."""


class Heartbeat(Event, tag="heartbeat", frozen=True):
    runner: AgentName | None = None
    seq: Version | UnsetType = UNSET
    """The runner counts a claim's heartbeats 1, 2, 3, ...: for a job claimed with a key the projector
    refuses a heartbeat whose `seq` is not above the last it took for that claim (without `seq`, whose
    `ts` is not later), so a captured heartbeat replayed cannot keep a dead runner's job open. Left out
    (UNSET) by an older runner, whose heartbeats keep their bytes."""


class Succeeded(Event, tag="succeeded", frozen=True):
    exit_code: ExitCode | None = 0
    result: Text | None = None
    git: GitInfo | None = None
    usage: Usage | None | UnsetType = UNSET
    outputs: Outputs | UnsetType = UNSET
    denials: Denials | UnsetType = UNSET


class Failed(Event, tag="failed", frozen=True):
    exit_code: ExitCode | None = None
    error: Text | None = None
    git: GitInfo | None = None
    usage: Usage | None | UnsetType = UNSET
    outputs: Outputs | UnsetType = UNSET
    denials: Denials | UnsetType = UNSET


class CancelRequested(Event, tag="cancel_requested", frozen=True):
    reason: ShortText | None = None
    tree: bool | UnsetType = UNSET
    """`mam cancel --tree`: the projector also cancels every unfinished job delegated under this one
    (derived `cancel_requested` events, each reason naming this job; see `mam.contract.cascade`)."""


Question = Annotated[str, Meta(min_length=1, max_length=4096)]
Choices = Annotated[list[Annotated[str, Meta(min_length=1, max_length=256)]], Meta(min_length=1, max_length=32)]


class InputRequested(Event, tag="input_requested", frozen=True):
    """A running job asks a person a question (`mam ask`): it is `waiting` until answered."""

    question: Question
    choices: Choices | None = None
    """When given, an answer must be one of these."""


class InputProvided(Event, tag="input_provided", frozen=True):
    """The answer to a waiting job's question (`mam answer`): the job runs on."""

    answer: Text
    question_id: EventId | None = None
    """The id of the `input_requested` this answers; when given, an answer to another question is refused."""


class InputWithdrawn(Event, tag="input_withdrawn", frozen=True):
    """The job stops waiting without an answer (`mam ask --timeout` ran out)."""

    question_id: EventId | None = None
    reason: ShortText | None = None


class Cancelled(Event, tag="cancelled", frozen=True):
    reason: ShortText | None = None
    outputs: Outputs | UnsetType = UNSET
    usage: Usage | None | UnsetType = UNSET
    """What the agent reported using before it was stopped (its stream's token counts so far), when it did."""


class TimedOut(Event, tag="timed_out", frozen=True):
    """Published by the runner that enforced the job's timeout, or derived by the projector."""

    reason: ShortText | None = None
    exit_code: ExitCode | None = None
    git: GitInfo | None = None
    usage: Usage | None | UnsetType = UNSET
    outputs: Outputs | UnsetType = UNSET


class Released(Event, tag="released", frozen=True):
    """The runner that claimed a job gives it back unfinished (it is stopping: its drain ran out, or a
    second signal): the attempt ends (kept in `attempts`, not counted against `retries`) and the job is
    `submitted` again, for any runner to claim. Signed like the runner's other events."""

    reason: ShortText | None = None
    outputs: Outputs | UnsetType = UNSET


class Retrying(Event, tag="retrying", frozen=True):
    """Derived by the projector only: an attempt ended in an outcome the job's policy retries, so the
    job is submitted again as attempt `attempt`, claimable from `not_before` (the backoff, jitter
    included, is decided once, here, so a replay is exact)."""

    attempt: Annotated[int, Meta(ge=2, le=MAX_RETRIES + MAX_RELEASES + 1)]
    not_before: datetime
    reason: ShortText | None = None


class Unblocked(Event, tag="unblocked", frozen=True):
    """Derived by the projector only: every job a blocked job waits for (`after`) has succeeded."""

    reason: ShortText | None = None


class Lost(Event, tag="lost", frozen=True):
    reason: ShortText | None = None


class Pruned(Event, tag="pruned", frozen=True):
    """A finished job leaves the registry (`mam prune`, or the projector's own `retention`): its record
    and retained state are removed, its audit log is archived, and its id is never taken again."""

    reason: ShortText | None = None


AnyEvent = Union[
    Submitted,
    Claimed,
    Started,
    Progress,
    Output,
    Heartbeat,
    Succeeded,
    Failed,
    CancelRequested,
    Cancelled,
    TimedOut,
    Lost,
    Retrying,
    Unblocked,
    InputRequested,
    InputProvided,
    InputWithdrawn,
    Pruned,
    Released,
]

DERIVED_TYPES: Final = frozenset({"lost", "retrying", "unblocked"})
"""Types only the projector itself derives; refused when published by clients.

`timed_out` is not one: a runner that enforces a job's timeout publishes it
(the projector also derives it for a job that runs past its timeout plus the
grace). `lost` stays the projector's word: no client may declare a job lost."""

SIGNED_TYPES: Final = frozenset(
    {"started", "progress", "output", "heartbeat", "succeeded", "failed", "timed_out", "cancelled", "released"}
)
"""What only the runner that claimed a job speaks: for a job claimed with a `runner_key`, the projector
takes these only signed by that key. `input_requested`/`input_withdrawn` (`mam ask`, from the agent's own
process) are not among them: a question never ends a job or decides its outcome."""

EVENT_TYPES: Final = tuple(t.__struct_config__.tag for t in get_args(AnyEvent))

_decoder: Final = msgspec.json.Decoder(AnyEvent)
_encoder: Final = msgspec.json.Encoder()


def decode_event(payload: bytes) -> AnyEvent:
    """Decode one event, or raise `EventError` naming the field and the fault; nothing else, whatever
    the payload (too deep: `mam.contract.nesting`)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise EventError(f"payload is {len(payload)} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes")
    if payload.count(b"[") + payload.count(b"{") > MAX_NESTING and (deep := nesting_error(payload)) is not None:
        raise EventError(f"invalid event: {deep}")  # the counts first: most events have a handful of brackets
    try:
        event = _decode(payload)
        refuse_duplicate_keys(payload)
    except EventError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a payload makes the parser raise is a refusal
        raise EventError(f"cannot read the event: {type(exc).__name__}: {exc}") from None
    return event


def _decode(payload: bytes) -> AnyEvent:
    try:
        return _decoder.decode(payload)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if "`$.type`" in message and message.startswith("Invalid value"):
            message += f" (known types: {', '.join(EVENT_TYPES)})"
        elif "`$.v`" in message:
            message += f" (this release reads events of v {SCHEMA_VERSION}; a newer version needs a newer projector)"
        raise EventError(f"invalid event: {message}{ignored_note(payload, _FIELDS)}") from None
    except msgspec.DecodeError as exc:
        raise EventError(f"malformed JSON: {exc}") from None
    except RecursionError:
        raise EventError("invalid event: JSON nested too deeply for this process's stack") from None


_FIELDS: Final = {t.__struct_config__.tag: frozenset(t.__struct_fields__) | {"type"} for t in get_args(AnyEvent)}


def encode_event(event: AnyEvent) -> bytes:
    return _encoder.encode(event)


def event_type(event: AnyEvent) -> str:
    return str(type(event).__struct_config__.tag)  # every event type's tag is a str
