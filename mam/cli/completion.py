"""`mam completion bash|zsh|fish`: the shell script that completes mam's commands, flags and choices.

argcomplete does the completing: the script runs `mam` with `_ARGCOMPLETE=1` and the command line in
`COMP_LINE`/`COMP_POINT`, and `mam.cli.main` hands the parser to `argcomplete.autocomplete` before
parsing, which answers on file descriptor 8 and exits. The script is `argcomplete.shellcode` (what
`register-python-argcomplete --shell SHELL mam` prints; https://kislyuk.github.io/argcomplete/, shells
bash, zsh, fish, tcsh and powershell).

Beyond commands, flags and choices, the flags that name a job, a status, an agent, a session, a label
or an order complete from the workspace's registry (`mam.cli.completers`: files only, no broker). The
bash script is registered without `-o default`: a flag with nothing to offer (no session yet, a typo)
offers nothing rather than readline's file names; an argument that takes a file completes file names
through argcomplete itself.
"""

from __future__ import annotations

import argparse
import os

SHELLS = ("bash", "zsh", "fish")

HOW = {
    "bash": 'eval "$(mam completion bash)"   # in ~/.bashrc',
    "zsh": 'eval "$(mam completion zsh)"    # in ~/.zshrc, after compinit',
    "fish": "mam completion fish > ~/.config/fish/completions/mam.fish",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "completion", help="print the shell completion script for bash, zsh or fish",
        description="Print the script that completes mam's commands and flags. " + "; ".join(HOW.values()),
    )
    parser.add_argument("shell", choices=SHELLS, metavar="|".join(SHELLS))
    parser.set_defaults(handler=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from argcomplete import shellcode

    print(shellcode(["mam"], use_defaults=False, shell=args.shell), end="")
    return 0


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request (the shell script sets `_ARGCOMPLETE`) and exit; else nothing
    (argcomplete is imported only then, so a plain run does not pay for it)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


__all__ = ["SHELLS", "cmd_completion", "complete_if_asked", "register"]
