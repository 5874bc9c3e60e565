"""Brief answers: what a tool returns by default, so an agent's context is not filled with nulls.

A record in brief is the registry's record (`mam show --json`) without its
null fields, empty collections and the projector's bookkeeping keys, each
long text cut to `TEXT_SHOWN` characters. What was cut is named in `cut`
(key path -> the whole text's length) beside `more`, which says how to get
the rest (`full: true`: the whole record, as before). The sizes measured
before and after are in docs/mcp.md.
"""

from __future__ import annotations

from typing import Any, Final

TEXT_SHOWN: Final = 500
"""Characters of a prompt, result, error (any text) a brief answer shows."""

BOOKKEEPING: Final = frozenset(
    {
        "workspace",
        "version",
        "last_event_id",
        "updated_at",
        "runner_epoch",
        "runner_key",
        "output_seqs",
        "outputs_expected",
        "last_seen_at",
        "last_heartbeat_at",
        "question_id",
    }
)
"""Record keys for the projector and the runners, not for an agent reading a job (`full: true` has them)."""


def cut_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def _brief(value: Any, path: str, cut: dict[str, int], limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        cut[path] = len(value)
        return cut_text(value, limit)
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            shown = _brief(item, f"{path}.{key}" if path else str(key), cut, limit)
            if shown is not None and shown != {} and shown != []:
                kept[key] = shown
        return kept
    if isinstance(value, list):
        return [_brief(item, f"{path}.{index}", cut, limit) for index, item in enumerate(value)]
    return value


def brief(
    value: dict[str, Any], more: str, *, limit: int = TEXT_SHOWN, omit: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """`value` without null fields or empty collections (at any depth) and without the keys in `omit`, each
    string cut to `limit` characters; when one was, `cut` names it (its key path and whole length) and
    `more` says how to get the rest."""
    cut: dict[str, int] = {}
    shown: dict[str, Any] = _brief({k: v for k, v in value.items() if k not in omit}, "", cut, limit)
    if cut:
        shown["cut"] = cut
        shown["more"] = more
    return shown


def brief_record(record: dict[str, Any], more: str) -> dict[str, Any]:
    """A job's record (`as_dict`) in brief: see the module's docstring."""
    return brief(record, more, omit=BOOKKEEPING)


def full_hint(job_id: str) -> str:
    return f"call get_job with job={job_id!r} and full=true for the whole record"


__all__ = ["BOOKKEEPING", "TEXT_SHOWN", "brief", "brief_record", "cut_text", "full_hint"]
