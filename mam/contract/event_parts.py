"""The parts of events that are not events: a job's git provenance (`GitInfo`), what its agent used (`Usage`),
the counts and texts a terminal event carries, and the field types they share with `events.py`, which
re-exports every name here."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, Struct, UnsetType

from mam.contract.ids import END

ShortText = Annotated[str, Meta(max_length=256)]
Version = Annotated[int, Meta(ge=0, le=2**53 - 1)]
"""Counts and sequence numbers: at most 2^53 - 1, the largest integer every JSON reader keeps exact."""
RemoteUrl = Annotated[str, Meta(min_length=1, max_length=1024, pattern=r"^[^-\s][^\x00-\x1f\x7f]*" + END)]
"""A git remote's URL or path: no leading dash (never read as an option), no control character."""


class GitInfo(Struct, frozen=True, kw_only=True):
    """Provenance: the workspace's git state when a job was submitted or finished.

    A job run in a worktree of its own (`mam-agent --worktree`) also reports
    the commit it started from (`base`) and the diffstat of `base..commit`,
    and, from a runner that pushes its branches (`--push`), where to (`remote`).
    Those fields default to UNSET, which msgspec never encodes: a GitInfo
    without them has exactly the bytes it had before they existed."""

    commit: Annotated[str, Meta(pattern=r"^[0-9a-f]{7,64}" + END)] | None = None
    branch: ShortText | None = None
    dirty: bool = False
    base: Annotated[str, Meta(pattern=r"^[0-9a-f]{7,64}" + END)] | UnsetType = UNSET
    files_changed: Version | UnsetType = UNSET
    insertions: Version | UnsetType = UNSET
    deletions: Version | UnsetType = UNSET
    remote: RemoteUrl | UnsetType = UNSET
    """Where the runner pushed `branch` at `commit` (`mam-agent --push`): the workspace fetches it from
    there. With `push_error` it is where the push was tried, and the branch is not there."""
    push_error: ShortText | UnsetType = UNSET
    """Why the push to `remote` failed (git's reason); the job's outcome is its own."""


class Usage(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What an agent reported it used for a job (`agents/formats/`); a field it did not report is absent.

    `input_tokens` counts every input token, those served from a cache
    included; `cached_input_tokens` is that cached part. On the terminal events
    `usage` is left out unless given (UNSET), so a plain command's events keep
    their bytes and older projectors still take them."""

    cost_usd: Annotated[float, Meta(ge=0, le=1e9)] | None = None
    input_tokens: Version | None = None
    output_tokens: Version | None = None
    cached_input_tokens: Version | None = None
    turns: Version | None = None
    agent_session_id: ShortText | None = None


Outputs = Annotated[
    int,
    Meta(
        ge=0,
        le=2**53 - 1,
        description="The number of `output` events the runner published for this attempt "
        "(seq 0 .. outputs-1); the projector records which of them its log lacks.",
    ),
]
"""`outputs` on a terminal event a runner publishes. UNSET (left out) when not known, so the other
events keep their bytes."""


Denials = Annotated[
    list[ShortText],
    Meta(
        max_length=64,
        description="The tool calls the agent's CLI refused at the job's permission level, one "
        "line each (tool and target, e.g. 'Write /w/notes.md'), as its own result listed them.",
    ),
]
"""`denials` on `succeeded` and `failed`: UNSET (left out) when the agent reported none."""


__all__ = ["Denials", "GitInfo", "Outputs", "RemoteUrl", "ShortText", "Usage", "Version"]
