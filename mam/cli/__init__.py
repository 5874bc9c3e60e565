# PYTHON_ARGCOMPLETE_OK  (argcomplete: this program answers completion requests, mam.cli.completion)
"""`mam`: submit, inspect and serve jobs of a workspace."""

# The `mam` command line: the top parser and `main` (the `mam` console script). One module per command
# group beside this one (mam/cli/jobs.py, up.py, ...), imported only when its command runs: see
# mam/cli/commands.py. The marker above stays in this file's first 1024 characters: argcomplete looks for
# it in the entry point's module (`mam.cli:main`, so mam/cli/__init__.py) before completing `mam`.

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from mam import __version__

if TYPE_CHECKING:
    import argparse

PROG = "mam"


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The `mam` parser: every command registered, or (`lazy`) each only once argparse reaches it."""
    from mam.cli.top import build_parser as build

    return build(lazy=lazy)


def main(argv: list[str] | None = None) -> None:
    """`mam ARGS`. `mam --version` answers before anything else is imported: a script asks it to learn
    which mam it has, and it costs about what starting Python does (docs/performance.md)."""
    if (sys.argv[1:] if argv is None else argv) == ["--version"] and "_ARGCOMPLETE" not in os.environ:
        print(f"{PROG} {__version__}")
        return
    from mam.cli.top import main as run

    run(argv)


__all__ = ["PROG", "build_parser", "main"]
