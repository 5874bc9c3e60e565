"""What the fake agent CLIs share: the argv check, the prompt from stdin, what the prompt asks for.

The prompt's words choose the run: `fail` (the agent reports an error in its
stream and still exits 0), `crash` (the stream stops mid-line: the process
writes to stderr and kills itself), `hang` (it stops writing and waits to be
killed), anything else a success whose answer is `answer: <prompt>`. Every line is flushed as it is written, like the real
CLIs do on a pipe.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def require(condition: bool, message: str) -> None:
    """Exit 2 with the CLI's usage complaint unless `condition`: the argv contract the profile must keep."""
    if not condition:
        print(f"{os.path.basename(sys.argv[0])}: {message}; got argv {sys.argv[1:]}", file=sys.stderr)
        sys.exit(2)


def has_pair(args: list[str], flag: str, value: str) -> bool:
    return any(a == flag and b == value for a, b in zip(args, args[1:], strict=False)) or f"{flag}={value}" in args


def read_prompt() -> str:
    require(not sys.stdin.isatty(), "no prompt: expected it on stdin")
    prompt = sys.stdin.read().strip()
    require(bool(prompt), "empty prompt on stdin")
    return prompt


def mode(prompt: str) -> str:
    words = prompt.split()
    return next((word for word in ("fail", "crash", "hang") if word in words), "ok")


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def crash(partial: str) -> None:
    """Stop mid-line, as a killed process does: part of a JSON line, a word on stderr, SIGKILL."""
    sys.stdout.write(partial)
    sys.stdout.flush()
    print("fatal: connection reset by peer", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def hang() -> None:
    """Stop writing, as an agent stuck on a long tool call does, until a signal ends the process."""
    while True:
        time.sleep(1)
