"""Hypothesis strategies for hostile JSON events: every event type, built as raw JSON text.

Text, not Python values through `json.dumps`, because the hostile parts are what a JSON encoder
never writes: duplicate keys, `NaN`/`Infinity`, numbers past any float or 2^64, lone UTF-16
surrogates (`"\\ud800"`), nesting thousands deep. Each example starts from a valid event of one
type and spoils some of it: known fields given a wrong or hostile value, unknown fields (which the
decoder skips, by recursion) holding deep nesting, a key given twice, the type itself wrong.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import strategies as st

from mam.contract import events as ev

VALID: dict[str, dict[str, Any]] = {
    "submitted": {"prompt": "p", "agent": "a"},
    "claimed": {"runner": "r"},
    "started": {},
    "progress": {"message": "m", "percent": 50},
    "output": {"text": "t", "seq": 0},
    "heartbeat": {},
    "succeeded": {"exit_code": 0},
    "failed": {"exit_code": 1, "error": "e"},
    "cancel_requested": {"reason": "r"},
    "cancelled": {},
    "timed_out": {},
    "lost": {},
    "retrying": {"attempt": 2, "not_before": "2026-01-01T00:00:00Z"},
    "unblocked": {},
    "input_requested": {"question": "q?"},
    "input_provided": {"answer": "a"},
    "input_withdrawn": {},
    "pruned": {},
    "released": {},
}
"""A minimal valid body of each type (less `type`): the examples spoil it."""

TYPES = sorted(VALID)
assert set(TYPES) == set(ev.EVENT_TYPES), "a new event type needs a valid body here"
FIELDS = {
    t.__struct_config__.tag: [f.name for f in msgspec.structs.fields(t)]  # type: ignore[attr-defined]
    for t in ev.AnyEvent.__args__  # type: ignore[attr-defined]
}

_DIGITS = "12345678901234567890"
SCALARS = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e400",
        "-1e400",
        "1e-400",
        "-0",
        "0.0",
        "1E+308",
        "4.9e-324",
        "18446744073709551616",
        "-9223372036854775809",
        "9007199254740993",
        _DIGITS * 50,
        "-" + _DIGITS * 250,
        "true",
        "false",
        "null",
        '""',
        '"\\ud800"',
        '"\\udfff"',
        '"a\\ud800b"',
        '"\\ud800\\ud800"',
        '"\\u0000"',
        '"\\udbff\\udfff"',
        '"x\\"y"',
        '"' + "x" * 70_000 + '"',
        '"2026-02-30T25:00:00Z"',
        '"0001-01-01T00:00:00"',
        '"9999-12-31T23:59:59-23:59"',
        '"../../etc"',
        '"-rf"',
        '"_rejected.jsonl"',
        "[]",
        "{}",
    ]
)
"""Numbers past every limit, non-finite ones, lone surrogates, strings past every length, odd dates and ids."""


def _nest(depth: int, kind: str) -> str:
    if kind == "arrays":
        return "[" * depth + "]" * depth
    if kind == "objects":
        return '{"k":' * depth + "1" + "}" * depth
    return '[{"k":' * (depth // 2) + "1" + "}]" * (depth // 2)


DEEP = st.builds(
    _nest,
    st.sampled_from([63, 64, 65, 200, 1000, 3000, 10_000, 30_000]),
    st.sampled_from(["arrays", "objects", "mixed"]),
)
"""Nesting around the limit (64) and far past Python's recursion limit."""

LEAVES = st.one_of(
    SCALARS,
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.text(max_size=40).map(json.dumps),
)


def _container(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
    objects = st.lists(st.tuples(st.sampled_from(["k", "type", "id", "prompt", ""]), children), max_size=4).map(
        lambda pairs: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"
    )
    return arrays | objects


VALUES = st.one_of(DEEP, st.recursive(LEAVES, _container, max_leaves=12))
"""Any hostile JSON value: deep nesting, or a small tree of hostile leaves (duplicate keys included)."""


@st.composite
def hostile_event(draw: st.DrawFn, types: list[str] | None = None) -> bytes:
    """One event's payload: a valid body of some type with known fields spoilt, unknown fields added,
    keys repeated; sometimes the `type` itself is wrong."""
    kind = draw(st.sampled_from(types or TYPES))
    members = [(key, json.dumps(value)) for key, value in VALID[kind].items()]
    known = [name for name in FIELDS[kind] if name != "sig"]
    for name in draw(st.lists(st.sampled_from(known), max_size=3, unique=True)):
        members = [m for m in members if m[0] != name] + [(name, draw(VALUES))]
    for name in draw(st.lists(st.sampled_from(["junk", "x_future", "meta", "git2"]), max_size=2, unique=True)):
        members.append((name, draw(VALUES)))
    if members and draw(st.booleans()):
        key, _ = draw(st.sampled_from(members))
        members.append((key, draw(VALUES | st.just(json.dumps("again")))))
    type_value = draw(st.sampled_from([json.dumps(kind)] * 6 + ["null", "1", '"no-such-type"', "[]"]))
    members = draw(st.permutations([("type", type_value), *members]))
    return ("{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in members) + "}").encode("utf-8", "surrogatepass")


KEY = "A" * 42 + "E="
EXTREMES: dict[str, list[Any]] = {
    "ts": [
        "0001-01-01T00:00:00",
        "0001-01-01T00:00:00+23:59",
        "0001-01-01T00:00:00-23:59",
        "1970-01-01T00:00:00Z",
        "2000-02-29 12:00:00.123456789",
        "2026-01-01T00:00:00+0100",
    ],
    "id": ["a" * 128, ".", "..", "-", "::", "e1"],
    "expected_version": [0, 1, 2**53 - 1],
    "by": ["", "x" * 256, "\u202e\u0000"],
    "timeout": [5e-324, 31 * 24 * 3600],
    "labels": [{}, {f"k{i}": "v" * 256 for i in range(64)}, {"a/b.c-d_e": ""}],
    "priority": [-1000, 1000],
    "retries": [0, 100],
    "retry_on": [["failed", "lost", "timed_out"], ["lost"]],
    "backoff": [0, 3600],
    "after": [[], ["known"], ["new"], ["done"], ["run"], ["a" + str(i) for i in range(64)]],
    "parent": ["known", "done", "run", "new", "nope"],
    "retry_of": ["done", "known", "nope"],
    "resumes": ["done", "known", "nope"],
    "resume_session": ["", "s" * 256],
    "resume_root": ["done", "a" * 128],
    "resume_usage": [{"input_tokens": 2**53 - 1, "output_tokens": 0, "cached_input_tokens": 2**53 - 1}, {}],
    "exit_code": [-(2**31), 2**31 - 1, None],
    "percent": [0, 100, 5e-324],
    "seq": [0, 2**53 - 1],
    "outputs": [0, 2**53 - 1],
    "usage": [
        {
            "cost_usd": 1e9,
            "input_tokens": 2**53 - 1,
            "output_tokens": 2**53 - 1,
            "cached_input_tokens": 2**53 - 1,
            "turns": 2**53 - 1,
        },
        {},
    ],
    "git": [
        {
            "commit": "a" * 64,
            "branch": "x" * 256,
            "dirty": True,
            "base": "b" * 7,
            "files_changed": 2**53 - 1,
            "remote": "r" * 1024,
            "push_error": "e" * 256,
        },
        {},
    ],
    "budget_tokens": [1, 2**53 - 1],
    "budget_usd": [5e-324, 1e9],
    "tree_budget_tokens": [1, 2**53 - 1],
    "tree_budget_usd": [5e-324, 1e9],
    "question": ["q" * 4096],
    "choices": [["c" * 256] * 32],
    "answer": ["", "a" * 65536],
    "question_id": ["e1", "a" * 128],
    "reason": ["", "r" * 256],
    "epoch": ["e" * 64, "0"],
    "runner_key": [KEY],
    "runner": ["r", "r" * 64, "other"],
    "pid": [0, 2**31 - 1],
    "counts_outputs": [True, False],
    "message": ["m" * 65536],
    "text": ["", "t" * 65536, "\u0000\ud7ff\ue000\U0010ffff"],
    "stream": ["stderr"],
    "error": ["e" * 65536],
    "result": ["r" * 65536],
    "tree": [True],
    "prompt": ["p" * 512 * 1024, "\U0001f600"],
    "agent": ["a" * 64, "0"],
    "agent_session": ["s" * 256],
    "role": ["x" * 256],
    "permissions": ["read-only", "full"],
    "requeue": [False],
    "model": ["m" * 128, "a@b:c/d"],
    "max_turns": [1, 10_000],
    "require": [{"k": "v"}, {f"k{i}": "v" for i in range(32)}],
    "parent_close": ["cancel", "abandon"],
    "attempt": [2, 201],
    "not_before": ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"],
}
"""Values at the edges of what the schema takes (each valid on its own): they pass the decoder and
reach the fold, where a bug would show."""


@st.composite
def extreme_event(draw: st.DrawFn) -> bytes:
    """A valid event of any type whose fields sit at the schema's edges."""
    kind = draw(st.sampled_from(TYPES))
    body: dict[str, Any] = {"type": kind, **VALID[kind]}
    known = [name for name in FIELDS[kind] if name in EXTREMES]
    for name in draw(st.lists(st.sampled_from(known), max_size=6, unique=True)) if known else []:
        body[name] = draw(st.sampled_from(EXTREMES[name]))
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


__all__ = ["DEEP", "EXTREMES", "FIELDS", "TYPES", "VALID", "VALUES", "extreme_event", "hostile_event"]
