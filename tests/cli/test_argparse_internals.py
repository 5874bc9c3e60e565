"""The reach into argparse's private parts (`mam/process/argparse_internals.py`): its check passes on this Python
and names what a changed argparse lacks; each use works on mam's own parser (the walk of subcommands, the
flags, the lazy commands' swap, the sorted and grouped help)."""

from __future__ import annotations

import argparse

import pytest

from mam.cli.commands import HELP_GROUPS, LazyCommands
from mam.cli.top import build_parser
from mam.contract.errors import LibraryChanged
from mam.process import argparse_internals as internals

pytestmark = pytest.mark.fast


def test_this_pythons_argparse_passes_the_check() -> None:
    internals.check()


class _ParserWithOtherFormatter(argparse.ArgumentParser):
    """argparse as a release whose `_get_formatter` takes a parameter would be."""

    def _get_formatter(self, width: int = 80) -> argparse.HelpFormatter:  # type: ignore[override]
        return super()._get_formatter()


class _ParserWithOtherGroups(argparse.ArgumentParser):
    """argparse as a release that keeps its mutually exclusive groups in another type would be."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._mutually_exclusive_groups = ()  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("parser_class", "named"),
    [
        (_ParserWithOtherFormatter, r"lacks _ParserWithOtherFormatter\._get_formatter\(\) \(now \(width\)\)"),
        (_ParserWithOtherGroups, r"lacks _ParserWithOtherGroups\._mutually_exclusive_groups as list \(now tuple\)"),
    ],
)
def test_an_argparse_without_a_touched_name_is_refused_by_name(
    parser_class: type[argparse.ArgumentParser], named: str
) -> None:
    with pytest.raises(LibraryChanged, match=r"^Python 3\.\d+\.\d+'s argparse " + named):
        internals.check(parser_class)


def test_the_walk_finds_every_command_and_its_flags() -> None:
    parser = build_parser()
    (sub,) = internals.subparsers_of(parser)
    assert {"jobs", "submit", "up"} <= set(sub.choices)
    assert internals.subcommands(parser) == list(sub.choices.values())
    assert "--json" in internals.option_strings(parser)
    submit = sub.choices["submit"]
    assert "-v" in internals.option_strings(submit)  # `finish_command` gave each its -v
    assert internals.defaults_of(parser).command is None
    assert not any(internals.is_subparsers(action) for action in internals.actions(submit))


def test_a_lazy_command_swaps_its_placeholder_for_the_real_parser() -> None:
    parser = build_parser(lazy=True)
    (sub,) = internals.subparsers_of(parser)
    assert isinstance(sub, LazyCommands)
    before = internals.command_lines(sub)
    assert "--status" not in internals.option_strings(sub.choices["jobs"])  # a placeholder: no flags
    sub.load("jobs")
    assert "--status" in internals.option_strings(sub.choices["jobs"])
    after = internals.command_lines(sub)
    assert set(after) == set(before) and after["jobs"] is not before["jobs"]


def test_the_help_lists_the_commands_in_their_sections_then_the_options() -> None:
    help_text = build_parser().format_help()
    titles = [title for title, _ in HELP_GROUPS]
    assert [help_text.index(f"\n{title}:") for title in titles] == sorted(help_text.index(f"\n{t}:") for t in titles)
    assert help_text.index(f"\n{titles[-1]}:") < help_text.index("\noptions:")
    assert "{" not in help_text.split("\n\n", 1)[1].split("options:")[0]  # no `{jobs,submit,...}` line


def test_forgotten_commands_leave_no_parser_or_help_line() -> None:
    parser = argparse.ArgumentParser(prog="probe")
    sub = parser.add_subparsers()
    for name in ("a", "b", "c"):
        sub.add_parser(name, help=name)
    internals.forget_commands(sub, ["b"])
    internals.sort_commands(sub, lambda name: -ord(name))
    assert list(sub.choices) == ["a", "c"]
    assert list(internals.command_lines(sub)) == ["c", "a"]
