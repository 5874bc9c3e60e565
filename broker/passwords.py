"""Password files for the embedded broker: `user:argon2-hash` lines, as amqtt reads them."""

from __future__ import annotations

import os
from pathlib import Path

from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

from mam.contract.errors import UsageError


def set_password(path: Path, username: str, password: str) -> None:
    """Add or replace `username` in the file, written atomically with mode 0600."""
    if not username or ":" in username or any(c.isspace() for c in username):
        raise UsageError(f"invalid user name {username!r}: no ':' and no spaces")
    if not password:
        raise UsageError("the password is empty")
    lines = []
    if path.exists():
        lines = [line for line in path.read_text().splitlines() if line and not line.startswith(f"{username}:")]
    lines.append(f"{username}:{PasswordHash((Argon2Hasher(),)).hash(password)}")
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def check_password_file(path: Path) -> None:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError as exc:
        raise UsageError(
            f"cannot read password file {str(path)!r}: {exc.strerror}; create it with `mam passwd`"
        ) from None
    if not lines or any(":" not in line for line in lines):
        raise UsageError(f"password file {str(path)!r} has no 'user:hash' lines; create it with `mam passwd`")
