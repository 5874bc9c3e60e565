"""`mam passwd`: add or change a user in a broker password file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mam.cli.completers import complete
from mam.process.argparse_internals import Subparsers


def register(sub: Subparsers) -> None:
    passwd = sub.add_parser("passwd", help="add or change a user in a broker password file")
    complete(passwd.add_argument("file", type=Path, metavar="FILE"), "file")
    complete(passwd.add_argument("user", metavar="USER"), "user")
    passwd.set_defaults(handler=cmd_passwd)


def cmd_passwd(args: argparse.Namespace) -> int:
    import getpass

    from mam.broker.passwords import set_password

    password = (
        getpass.getpass(f"password for {args.user}: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    )
    set_password(args.file, args.user, password)
    print(f"{args.user} set in {args.file}")
    return 0
