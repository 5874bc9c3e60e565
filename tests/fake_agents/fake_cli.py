"""What the fake agent CLIs share: the argv check, the prompt from stdin, what the prompt asks for.

The prompt's words choose the run: `fail` (the agent reports an error in its
stream and still exits 0), `crash` (the stream stops mid-line: the process
writes to stderr and kills itself), `hang` (it stops writing and waits to be
killed), anything else a success whose answer is `answer: <prompt>`. Every line is flushed as it is written, like the real
CLIs do on a pipe. A prompt with the word `edit` also asks the agent to edit
`notes.md` in its working directory: it does (`edit_notes`) only when its
permission flags let it, and says so otherwise. A prompt with the word `spend`
makes a long run whose usage grows message by message (a job's budget stops it).

Sessions: each run stores its session (`remember`) under `FAKE_AGENT_SESSIONS`
(default: a directory in the temp dir), per working directory for claude and
gemini as the real ones keep them (codex's are found from anywhere); a resumed run (`claude --resume ID`,
`codex exec resume ID -`, `gemini --resume ID`) must name one stored before,
as the real CLIs refuse an unknown session, and its answer says what the
session was asked before (`recall`).

Each fake parses its argv as its CLI does (`parse`): an option the real CLI
does not have, or a value outside an option's documented choices, is refused
in that CLI's own style of error, so a profile that passes a wrong flag fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import tempfile
import time

VERSIONS = {"claude": "2.1.197 (Claude Code)", "codex": "codex-cli 0.171.0", "gemini": "0.61.0", "aider": "aider 0.86.2"}
"""What each fake prints for `--version`: the real CLI's output at the version mam was tested with
(`mam doctor` and `mam-agent` at start read it; agents/tested_clis.py keeps those versions)."""

if sys.argv[1:] == ["--version"] and os.path.basename(sys.argv[0]) in VERSIONS:
    print(VERSIONS[os.path.basename(sys.argv[0])])
    sys.exit(0)


def require(condition: bool, message: str) -> None:
    """Exit 2 with the CLI's usage complaint unless `condition`: the argv contract the profile must keep."""
    if not condition:
        print(f"{os.path.basename(sys.argv[0])}: {message}; got argv {sys.argv[1:]}", file=sys.stderr)
        sys.exit(2)


def has_pair(args: list[str], flag: str, value: str) -> bool:
    return any(a == flag and b == value for a, b in zip(args, args[1:], strict=False)) or f"{flag}={value}" in args


class Style:
    """How a CLI's argument parser refuses an unknown option: its message and exit code."""

    def __init__(self, unknown: str, bad_choice: str, code: int, usage: str = "") -> None:
        self.unknown, self.bad_choice, self.code, self.usage = unknown, bad_choice, code, usage

    def refuse(self, message: str) -> None:
        if self.usage:
            print(self.usage, file=sys.stderr)
        print(message, file=sys.stderr)
        sys.exit(self.code)


def parse(args: list[str], switches: dict[str, tuple[str, ...]], valued: dict[str, tuple[str, ...]], style: Style,
          choices: dict[str, tuple[str, ...]] | None = None) -> tuple[dict[str, str], list[str]]:
    """The given options (`--flag value`, `--flag=value`; a switch as "") and the positionals.

    `switches` and `valued` map each option the CLI has (without and with a value) to its other
    spellings; `choices` an option's allowed values."""
    names: dict[str, tuple[str, bool]] = {}
    for table, takes in ((switches, False), (valued, True)):
        for option, aliases in table.items():
            for name in (option, *aliases):
                names[name] = (option, takes)
    given: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            i += 1
            continue
        flag, eq, inline = arg.partition("=")
        if flag not in names:
            style.refuse(style.unknown.format(flag=flag, arg=arg))
        option, takes = names[flag]
        if takes and not eq:
            if i + 1 >= len(args):
                style.refuse(f"error: option '{flag}' argument missing")
            inline = args[i + 1]
            i += 1
        allowed = (choices or {}).get(option)
        if allowed and inline not in allowed:
            style.refuse(style.bad_choice.format(flag=flag, value=inline, allowed=", ".join(allowed)))
        given[option] = inline
        i += 1
    return given, positional


def wants_edit(prompt: str) -> bool:
    return "edit" in prompt.split()


def edit_notes(program: str, prompt: str) -> str:
    """Append a line to notes.md in the working directory (the job's worktree under mam); its path."""
    with open("notes.md", "a", encoding="utf-8") as notes:
        notes.write(f"{program}: {prompt}\n")
    return os.path.abspath("notes.md")


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


def _sessions() -> str:
    path = os.environ.get("FAKE_AGENT_SESSIONS") or os.path.join(tempfile.gettempdir(), f"fake-agent-sessions-{os.getuid()}")
    os.makedirs(path, exist_ok=True)
    return path


def _store(program: str, session: str, per_directory: bool) -> str:
    """Where a session is kept: per working directory for claude and gemini (Claude Code keeps them in
    ~/.claude/projects/<the cwd>, Gemini CLI per project directory), in one place for codex (its sessions
    are found by id from any directory)."""
    base = _sessions()
    if per_directory:
        base = os.path.join(base, hashlib.sha256(os.getcwd().encode()).hexdigest()[:16])
        os.makedirs(base, exist_ok=True)
    return os.path.join(base, f"{program}-{session}.json")


def remember(program: str, session: str, prompt: str, *, per_directory: bool = True) -> None:
    """Store the session's prompts so far (a resumed session's earlier ones first)."""
    earlier = recall(program, session, per_directory=per_directory) or []
    with open(_store(program, session, per_directory), "w", encoding="utf-8") as out:
        json.dump([*earlier, prompt], out)


def recall(program: str, session: str, *, per_directory: bool = True) -> list[str] | None:
    """The prompts a stored session was given, or None if there is no such session (here, for the CLIs that
    keep sessions per directory)."""
    try:
        with open(_store(program, session, per_directory), encoding="utf-8") as stored:
            return json.load(stored)
    except FileNotFoundError:
        return None


def sessions_here(program: str) -> bool:
    """Whether any session of `program` was kept in this working directory."""
    base = os.path.join(_sessions(), hashlib.sha256(os.getcwd().encode()).hexdigest()[:16])
    return os.path.isdir(base) and any(name.startswith(f"{program}-") for name in os.listdir(base))
