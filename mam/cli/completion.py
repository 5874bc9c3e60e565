"""`mam completion bash|zsh|fish`: the shell script that completes mam's commands, flags and their values.

argcomplete does the completing: the script runs `mam` with `_ARGCOMPLETE=1` and the command line in
`COMP_LINE`/`COMP_POINT`, and `mam.cli.main` hands the parser to `argcomplete.autocomplete` before
parsing, which answers on file descriptor 8 and exits. The script is `argcomplete.shellcode` (what
`register-python-argcomplete --shell SHELL mam` prints; https://kislyuk.github.io/argcomplete/, shells
bash, zsh, fish, tcsh and powershell).

Every flag and argument that takes a value has a completer (`mam.cli.completers`): a job (by its start
or its short id), a status, an agent, a session, a label, a runner label, a role, a model, an order, ...
from the workspace's files only, no broker; file or directory names for a path; nothing for a free value
(a prompt, a number). argcomplete's own default, file names for a flag without a completer, is replaced
by nothing, and the bash script is registered without `-o default`: a flag with nothing to offer (no job
yet, a typo, a number) offers nothing rather than readline's file names.
"""

from __future__ import annotations

import argparse
import os

from mam.process.argparse_internals import Subparsers

SHELLS = ("bash", "zsh", "fish")

HOW = {
    "bash": 'eval "$(mam completion bash)"   # in ~/.bashrc',
    "zsh": 'eval "$(mam completion zsh)"    # in ~/.zshrc, after compinit',
    "fish": "mam completion fish > ~/.config/fish/completions/mam.fish",
}


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print the script that completes mam's commands and flags. " + "; ".join(HOW.values()),
    )
    parser.add_argument("shell", choices=SHELLS, metavar="|".join(SHELLS))
    parser.set_defaults(handler=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    print(shellcode(["mam"], use_defaults=False, shell=args.shell), end="")
    return 0


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request (the shell script sets `_ARGCOMPLETE`) and exit; else nothing
    (argcomplete is imported only then, so a plain run does not pay for it).

    `parser` may be lazy (`mam.cli.build_parser(lazy=True)`): the commands named on the line so far are
    registered for real first (argcomplete reads the parsers as they are when it starts), and only
    theirs: completing `mam jobs --status` does not import the broker, the dashboard or the MCP SDK."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete
    from argcomplete.completers import SuppressCompleter

    from mam.cli.commands import LazyCommands
    from mam.cli.completers import complete_below
    from mam.process.argparse_internals import actions

    line = os.environ.get("COMP_LINE", "")[: _int(os.environ.get("COMP_POINT"), len(os.environ.get("COMP_LINE", "")))]
    for action in actions(parser):
        if isinstance(action, LazyCommands):
            for word in line.split()[1:]:
                action.load(word)
    complete_below(parser)
    argcomplete.autocomplete(parser, default_completer=SuppressCompleter())  # no completer: nothing, not files


def _int(text: str | None, default: int) -> int:
    try:
        return int(text or "")
    except ValueError:
        return default


__all__ = ["SHELLS", "cmd_completion", "complete_if_asked", "register"]
