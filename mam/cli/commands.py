"""The `mam` subcommands: which module registers each, and importing that module only when its command runs.

`mam --version`, `mam --help` and `mam jobs` do not load the broker, the dashboard, the projector or
the MCP SDK. The top parser holds a placeholder for every command (its name and its help line, all
`mam --help` prints); `LazyCommands`, the subparsers action, swaps in the real subparser when argparse
reaches the command: it imports the module of the command's group and calls its `register`, as a full
parser (`build_parser()`, shell completion) does for every group up front. The help lines here are
the ones `register` gives (tests/codebase/test_cli_layers.py checks they agree).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mam.cli.global_options import finish_command
from mam.process.argparse_internals import Subparsers, SubparsersAction, forget_commands, sort_commands


@dataclass(frozen=True)
class CommandGroup:
    """The commands one module registers (its `register(subparsers)`), with their help lines."""

    module: str
    helps: dict[str, str]

    def register(self, sub: Subparsers) -> None:
        importlib.import_module(self.module).register(sub)


COMMAND_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup("mam.cli.up", {"up": "run the embedded broker and the projector for a workspace"}),
    CommandGroup(
        "mam.cli.submit",
        {
            "submit": "submit a job; returns once the projector has recorded it",
            "session": "agent sessions: create one (with its onboarding job), list them",
            "cancel": "ask for a job to be cancelled; returns once the projector has recorded the request",
            "retry": "resubmit a finished job as a new job (same prompt, agent, labels, parent; retry_of set)",
            "wait": "wait until the jobs have finished; exit 0 if all succeeded, 1 if one did not",
        },
    ),
    CommandGroup(
        "mam.cli.ask",
        {
            "ask": "(inside a job) ask a person a question; prints the answer once given",
            "answer": "answer the question a waiting job asked; returns once the projector has recorded it",
        },
    ),
    CommandGroup(
        "mam.web.cli",
        {
            "dashboard": "serve the web dashboard: live jobs, their output, runners, refusals; cancel a job",
        },
    ),
    CommandGroup(
        "mam.mcp_server.cli",
        {
            "mcp": "serve the workspace's jobs as MCP tools over stdio (`claude mcp add mam -- mam mcp`)",
        },
    ),
    CommandGroup("mam.cli.passwd", {"passwd": "add or change a user in a broker password file"}),
    CommandGroup("mam.cli.workspace", {"workspace": "show the resolved workspace: root, id, dirs, broker"}),
    CommandGroup(
        "mam.cli.doctor",
        {
            "doctor": "check whether mam will work here: workspace files, broker, projector, agent CLIs",
        },
    ),
    CommandGroup(
        "mam.cli.jobs",
        {
            "jobs": "list the workspace's jobs, newest first; `mam jobs tree` draws the delegation tree",
            "watch": "the workspace's jobs, live (the same as `mam jobs --watch`)",
            "agents": "the runners: online or offline, since when, the jobs they hold",
        },
    ),
    CommandGroup("mam.cli.completion", {"completion": "print the shell completion script for bash, zsh or fish"}),
    CommandGroup(
        "mam.cli.usage",
        {
            "usage": "total the cost and tokens the agents reported, by agent, session or delegation tree",
        },
    ),
    CommandGroup(
        "mam.cli.prune",
        {
            "prune": "remove finished jobs older than a duration: records and retained states go, logs are archived",
        },
    ),
    CommandGroup(
        "mam.cli.review",
        {
            "diff": "show a worktree job's change against the commit it started from",
            "merge": "land a worktree job's branch on the checkout's current branch",
            "discard": "remove a finished worktree job's branch and worktree (its work is lost)",
            "worktrees": "list the jobs' branches and worktrees; --clean removes spent ones",
        },
    ),
    CommandGroup("mam.cli.show", {"show": "show one job's record", "events": "show one job's audit log"}),
    CommandGroup("mam.cli.logs", {"logs": "print a job's output; -f follows it live until the job ends"}),
    CommandGroup(
        "mam.cli.rebuild",
        {
            "rebuild": "rebuild the registry from the audit log (stop the projector first, unless --verify)",
        },
    ),
    CommandGroup(
        "mam.cli.set_aside",
        {
            "set-aside": "list the messages the projector failed to handle and set aside; --replay tries them again",
        },
    ),
    CommandGroup(
        "mam.cli.schema",
        {
            "schema": "print the events' JSON Schema (draft 2020-12), as in docs/events.schema.json",
        },
    ),
)
"""By the module that registers them (`mam --help` groups them by `HELP_GROUPS`)."""

HELP_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Basic Commands",
        ("up", "submit", "jobs", "show", "logs", "events", "wait", "cancel", "retry", "session", "usage"),
    ),
    (
        "Live Commands (watch, answer and serve the jobs as they run)",
        ("watch", "agents", "ask", "answer", "dashboard", "mcp"),
    ),
    ("Review Commands (what worktree jobs changed)", ("diff", "merge", "discard", "worktrees")),
    ("Admin Commands", ("doctor", "workspace", "prune", "rebuild", "set-aside", "passwd", "schema", "completion")),
)
"""`mam --help`'s sections, as kubectl's (Basic, Deploy, Cluster Management, ...): each command in one."""

_HELP_ORDER = tuple(name for _, names in HELP_GROUPS for name in names)


def _group_of(name: str) -> CommandGroup:
    return next(group for group in COMMAND_GROUPS if name in group.helps)


class LazyCommands(SubparsersAction):
    """A subparsers action whose commands are placeholders until one is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.placeholders: dict[str, CommandGroup] = {}

    def add_placeholders(self) -> None:
        """Every command by name and help line, in `mam --help`'s order; nothing is imported."""
        for name in _HELP_ORDER:
            self.add_parser(name, help=_group_of(name).helps[name])
            self.placeholders[name] = _group_of(name)

    def load(self, name: str) -> None:
        """Replace the placeholders of `name`'s group with the parsers its module registers."""
        group = self.placeholders.get(name)
        if group is None:  # registered for real already, or not a command (argparse says so)
            return
        for command in group.helps:
            del self.placeholders[command]
        forget_commands(self, group.helps)
        group.register(self)
        for command in group.helps:
            finish_command(self.choices[command])

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Sequence[Any] | str | None,
        option_string: str | None = None,
    ) -> None:
        if values:
            self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


def register_all(sub: Subparsers) -> None:
    """Every command's real parser, each group's module imported (a full parser: completion, tests)."""
    for group in COMMAND_GROUPS:
        group.register(sub)
    order = {name: i for i, name in enumerate(_HELP_ORDER)}  # `mam --help` as with placeholders
    sort_commands(sub, lambda name: order.get(name, len(order)))


__all__ = ["COMMAND_GROUPS", "HELP_GROUPS", "CommandGroup", "LazyCommands", "register_all"]
