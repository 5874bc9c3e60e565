""" "Did you mean": a mistyped command, flag or choice names the nearest known one in its one-line error
(exit 2), as `mam` is run; generated typos of every command and of every flag of `mam jobs` (hypothesis),
each answered in one line without a traceback (issue 43, part 5)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.cli import build_parser
from mam.cli.commands import HELP_GROUPS

from support import mam, run
from workspace_support import WorkspacePaths

COMMANDS = [name for _, names in HELP_GROUPS for name in names]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        (["job"], "mam: error: COMMAND: invalid choice: 'job'; did you mean 'jobs'? (see mam --help)"),
        (
            ["jobs", "--stauts", "running"],
            "mam jobs: error: --stauts: no such flag; did you mean --status? (see mam jobs --help)",
        ),
        (
            ["submit", "--agnet", "shell", "--prompt", "p"],
            "mam submit: error: --agnet: no such flag; did you mean --agent? (see mam submit --help)",
        ),
        (
            ["jobs", "-o", "jsn"],
            "mam jobs: error: -o: invalid choice: 'jsn' (choose from 'json', 'yaml', 'name', "
            "'wide'); did you mean 'json'? (see mam jobs --help)",
        ),
        (
            ["jobs", "tre"],
            "mam jobs: error: view: invalid choice: 'tre' (choose from 'list', 'tree'); did you mean "
            "'tree'? (see mam jobs --help)",
        ),
        (
            ["--wrkspace", ".", "jobs"],
            "mam: error: --wrkspace: no such flag; did you mean --workspace? (see mam --help)",
        ),
        (
            ["session", "create", "--rloe", "r"],  # a nested command's flags are its own
            "mam session create: error: --rloe: no such flag; did you mean --role? (see mam session create --help)",
        ),
        (["jobs", "--frobnicate"], "mam jobs: error: --frobnicate: no such flag (see mam jobs --help)"),
    ],
)
async def test_a_typo_names_the_nearest_command_flag_or_choice(typed: list[str], said: str, ws: WorkspacePaths) -> None:
    done = await run(mam(*typed), cwd=ws.elsewhere)
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode() == said + "\n"
    assert done.stdout == b""


async def test_what_argparse_already_took_still_works(ws: WorkspacePaths) -> None:
    """A unique start of a long flag is that flag, a negative number is a value, and `--` ends the flags."""
    root = str(ws.root)
    done = await run(mam("jobs", "--lim", "3", "--workspace", root), cwd=ws.elsewhere)
    assert done.returncode == 0 and b"no jobs in" in done.stderr, done.stderr
    done = await run(mam("jobs", "--json", "--workspace", root), cwd=ws.elsewhere)
    assert done.returncode == 0 and done.stdout.strip() == b"[]", done.stderr
    done = await run(
        mam(
            "submit",
            "--agent",
            "a",
            "--prompt",
            "p",
            "--priority",
            "-5",
            "--broker",
            "mqtt://127.0.0.1:9",
            "--workspace",
            root,
        ),
        cwd=ws.elsewhere,
    )
    assert done.returncode == 3 and b"no such flag" not in done.stderr, done.stderr  # parsed; no broker there


def _refusal(argv: list[str]) -> tuple[int, str]:
    """The exit code and stderr of parsing `argv` as `mam` does (the lazy parser, each command on demand)."""
    err = io.StringIO()
    with (
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
        pytest.raises(SystemExit) as stopped,
    ):
        build_parser(lazy=True).parse_args(argv)
    return int(stopped.value.code or 0), err.getvalue()


def _typos(word: str) -> st.SearchStrategy[str]:
    """`word` with one letter dropped, doubled or swapped with the next."""
    at = st.integers(0, len(word) - 2)
    return st.one_of(
        at.map(lambda i: word[:i] + word[i + 1 :]),
        at.map(lambda i: word[:i] + word[i] + word[i:]),
        at.map(lambda i: word[:i] + word[i + 1] + word[i] + word[i + 2 :]),
    )


@pytest.mark.fast
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(COMMANDS).flatmap(lambda name: st.tuples(st.just(name), _typos(name))))
def test_a_generated_typo_of_a_command_is_one_line_naming_a_real_command(pair: tuple[str, str]) -> None:
    name, typo = pair
    if typo in COMMANDS:  # a real command is no typo
        return
    code, err = _refusal([typo])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"mam: error: COMMAND: invalid choice: {typo!r}"), err
    if "did you mean" in err:
        suggested = err.split("did you mean ", 1)[1].split("?", 1)[0].strip("'")
        assert suggested in COMMANDS, err


JOBS_FLAGS = [
    "--status",
    "--agent",
    "--session",
    "--label",
    "--parent",
    "--since",
    "--limit",
    "--sort-by",
    "--watch",
    "--workspace",
    "--broker",
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(JOBS_FLAGS).flatmap(lambda flag: st.tuples(st.just(flag), _typos(flag[2:]))))
def test_a_generated_typo_of_a_flag_is_one_line_naming_a_flag_of_the_command(pair: tuple[str, str]) -> None:
    flag, typo = pair
    typed = f"--{typo}"
    if any(
        known.startswith(typed)
        for known in [
            *JOBS_FLAGS,
            "--json",
            "--registry-dir",
            "--logs-dir",
            "--workspace-id",
            "--verbose",
            "--output",
            "--help",
        ]
    ):
        return  # still a flag, or the start of one (argparse takes that)
    code, err = _refusal(["jobs", typed, "x"])
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"mam jobs: error: {typed}: no such flag"), err
    if "did you mean" in err:
        suggested = err.split("did you mean ", 1)[1].split("?", 1)[0]
        assert suggested in _flags_of_jobs(), err


def _flags_of_jobs() -> set[str]:
    """The long flags `mam jobs --help` lists."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser(lazy=True).parse_args(["jobs", "--help"])
    return set(re.findall(r"--[a-z][a-z-]*", out.getvalue()))
