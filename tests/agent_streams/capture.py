"""Record what the real agent CLIs print, for the parser tests (tests/agents/test_agent_formats.py): each CLI runs as its
built-in profile does, in a scratch directory with two files, against a scripted model server (tests/model_servers),
and its stdout is saved here as NAME.jsonl (aider's plain text as NAME.txt). Run again after a CLI's pin moves (.ci/agent-clis):

    .venv/bin/python tests/agent_streams/capture.py

Needs the CLIs under MAM_AGENT_CLIS (tests/agent_clis.py); takes a few seconds per stream.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from agent_clis import CLIS  # noqa: E402
from model_servers import Script, Turn, serve  # noqa: E402

from mam.agents.profiles import builtin_profiles  # noqa: E402

PROMPT = "list the files and answer"
TRUST = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}  # what the gemini profile sets (agents/profiles.json)


def argv(agent: str, *extra: str) -> list[str]:
    """The profile's argv without its placeholders (the default level: nothing added)."""
    return [a for a in builtin_profiles()[agent].argv if not a.startswith("{")] + list(extra)


STREAMS: dict[str, tuple[str, list[str], list[Turn]]] = {
    "claude": (
        "claude-code",
        argv("claude-code"),
        [
            Turn(
                text="Let me look.",
                tool="Bash",
                args={"command": "ls", "description": "list"},
                input_tokens=120,
                output_tokens=45,
            ),
            Turn(tool="Glob", args={"pattern": "*.txt"}),  # not a tool this session has: an error result
            Turn(text="Two files: a.txt and b.txt.", input_tokens=300, output_tokens=20, cached_tokens=200),
        ],
    ),
    "claude-api-error": ("claude-code", argv("claude-code"), [Turn(status=400, error="prompt is too long")]),
    "claude-max-turns": (
        "claude-code",
        argv("claude-code", "--max-turns", "1"),
        [Turn(tool="Bash", args={"command": "ls", "description": "list"})],
    ),
    "codex": (
        "codex",
        argv("codex")[:-1] + ["-"],
        [
            Turn(
                text="Looking.",
                tool="exec_command",
                args={"cmd": "ls"},
                input_tokens=1000,
                output_tokens=50,
                cached_tokens=800,
            ),
            Turn(text="Two files: a.txt and b.txt.", input_tokens=2000, output_tokens=70, cached_tokens=1500),
        ],
    ),
    "codex-api-error": ("codex", argv("codex")[:-1] + ["-"], [Turn(status=400, error="bad request here")]),
    "gemini": (
        "gemini",
        argv("gemini"),
        [
            Turn(
                text="Let me look.", tool="list_directory", args={"dir_path": "."}, input_tokens=1200, output_tokens=30
            ),
            Turn(
                text="Two files: a.txt and b.txt.",
                input_tokens=1300,
                output_tokens=20,
                thinking_tokens=11,
                cached_tokens=800,
            ),
        ],
    ),
    "gemini-api-error": ("gemini", argv("gemini"), [Turn(status=400, error="bad request here")]),
    # aider prints plain text (its format reads it: agents/formats/aider.py), saved as NAME.txt
    "aider": (
        "aider",
        argv("aider"),
        [Turn(text="Two files: a.txt and b.txt.\n\n- **a.txt** says hello\n", input_tokens=1200, output_tokens=20)],
    ),
    "aider-retried": (
        "aider",
        argv("aider"),
        [
            *[Turn(status=500, error="overloaded here")] * 3,  # the SDK's 2 retries
            Turn(text="Answered after a retry."),
        ],
    ),
    "aider-api-error": ("aider", argv("aider"), [Turn(status=401, error="bad key here")]),
}


def capture(name: str) -> None:
    agent, command, turns = STREAMS[name]
    cli = CLIS[agent]
    cli.require()
    with tempfile.TemporaryDirectory(prefix=f"capture-{name}-") as scratch:
        work = Path(scratch) / "repo"
        work.mkdir()
        (work / "a.txt").write_text("hello\n")
        (work / "b.txt").write_text("world\n")
        with serve(cli.app, Script(turns)) as server:
            env = {**os.environ, **cli.environment(Path(scratch) / "home", server.url), **TRUST}
            done = subprocess.run(
                command, input=PROMPT, capture_output=True, text=True, cwd=work, env=env, timeout=120, check=False
            )
    suffix = ".txt" if agent == "aider" else ".jsonl"
    (HERE / f"{name}{suffix}").write_text(done.stdout.replace(scratch, "/tmp/scratch"), encoding="utf-8")
    print(f"{name}: exit {done.returncode}, {len(done.stdout.splitlines())} lines")


if __name__ == "__main__":
    for stream in sys.argv[1:] or STREAMS:
        capture(stream)
