"""Every numeric flag of mam, mam-agent, mam-broker and mam-projector is range-checked (issue 31): whatever number
(or not-number) is typed, the command parses it or refuses it in one line naming the flag (exit 2), and what it
accepts is finite and fits SQLite and the clock (`mam jobs --limit 99999999999999999999999` was a 27-line
OverflowError). The flags are found by walking the real parsers, so a new one is checked too."""

from __future__ import annotations

import argparse
import io
import math
import subprocess
from collections.abc import Iterator
from contextlib import redirect_stderr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.agents.runner_cli import build_parser as agent_parser
from mam.broker.cli import build_parser as broker_parser
from mam.cli import build_parser as mam_parser
from mam.process.argparse_internals import actions, is_subparsers, subparsers_of
from mam.projector.cli import build_parser as projector_parser

from support import DEAD_BROKER, child_env, mam
from workspace_support import WorkspacePaths

MOST_EXACT = 2**53 - 1
"""What any flag may accept at most: exact in JSON, in SQLite's integers and as a float (a count is at most
`MOST_WHOLE`, a token budget 2**53 - 1, a duration 100 years)."""
CHECKED_LATER = {"--priority"}
"""Numeric flags whose range is checked after parsing, still before anything is sent (one line, exit 2):
`mam submit --priority` (its bounds in the job spec: mam.contract.job_spec.convert)."""


def _numeric(action: argparse.Action) -> bool:
    """Whether the flag takes a number: its type makes one of "1" or "0.5"."""
    if not action.option_strings or not callable(action.type):
        return False
    for text in ("1", "0.5"):
        try:
            value = action.type(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True
    return False


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for sub in subparsers_of(parser):
        for name, child in sub.choices.items():
            yield from _walk(child, (*path, name))
    for action in actions(parser):
        if not is_subparsers(action) and _numeric(action):
            yield path, action


PROGRAMS = {
    "mam": mam_parser,
    "mam-agent": agent_parser,
    "mam-broker": broker_parser,
    "mam-projector": projector_parser,
}
FLAGS = [
    (program, path, action.option_strings[-1], action)
    for program, build in PROGRAMS.items()
    for path, action in _walk(build(), ())
]
IDS = [" ".join((program, *path, flag)) for program, path, flag, _ in FLAGS]


@pytest.mark.fast
def test_the_walk_finds_the_numeric_flags() -> None:
    found = set(IDS)
    for expected in (
        "mam jobs --limit",
        "mam logs --tail",
        "mam up --port",
        "mam submit --job-timeout",
        "mam retry --timeout",
        "mam session create --timeout",
        "mam-agent --concurrency",
        "mam-broker --max-connections",
        "mam-projector --lease",
        "mam submit --max-turns",
    ):
        assert expected in found
    assert len(found) > 30


NUMBERS = st.one_of(
    st.integers().map(str),
    st.integers(min_value=10**15, max_value=10**40).map(lambda n: f"{n}"),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-inf", "1e400", "-0", "0x10", "1_000", "\u0661\u0662", " 7 ", "1e-400", "", "9" * 5000]),
    st.text(max_size=20).filter(lambda text: text != "--"),  # `--flag=--` is argparse's own: no value at all
)


@pytest.mark.parametrize(("program", "path", "flag", "action"), FLAGS, ids=IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=NUMBERS)
def test_a_numeric_flag_takes_a_bounded_number_or_refuses_in_one_line(
    program: str, path: tuple[str, ...], flag: str, action: argparse.Action, text: str
) -> None:
    parser = PROGRAMS[program]()
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as exited:  # the type runs while the flag is parsed
        parser.parse_args([*path, f"{flag}={text}", "--help-is-not-a-flag"])  # an unknown flag: exit 2 after the types
    assert exited.value.code == 2
    said = err.getvalue()
    assert said.count("\n") == 1 and "Traceback" not in said, said
    try:
        value = action.type(text)  # type: ignore[misc]
    except (argparse.ArgumentTypeError, ValueError):
        assert f"{flag}: " in said or f"{flag} " in said, said  # the flag is named
        assert len(said) < 400, "what was typed is cut, the line stays readable"
        return
    assert f"{flag}: " not in said, said  # accepted: what is refused is the unknown flag, or a required one missing
    if flag in CHECKED_LATER:
        return
    assert isinstance(value, int | float) and math.isfinite(value) and abs(value) <= MOST_EXACT, value


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(number=st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from([2**31 - 1, 2**31, 2**63])))
@pytest.mark.slow
def test_real_commands_take_any_integer_without_a_traceback(ws: WorkspacePaths, number: int) -> None:
    """`mam jobs --limit`, `mam logs --tail` and `mam submit --priority` as processes (no broker answers)."""
    for argv in (
        ["jobs", "--limit", str(number)],
        ["logs", "nosuch", "--tail", str(number)],
        ["submit", "--prompt", "p", "--agent", "a", "--priority", str(number), "--broker", DEAD_BROKER],
    ):
        done = subprocess.run(
            mam(*argv, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        err = done.stderr.decode()
        assert "Traceback" not in err and done.returncode in (0, 1, 2, 3), (argv, err)
        if done.returncode == 2:
            assert err.count("\n") == 1 and str(number)[:20] in err, (argv, err)
