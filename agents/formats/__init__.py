"""Agent CLIs' machine-readable output: one parser per format, chosen by a profile's `format` key.

A profile without `format` runs a plain command: its stdout is the job's
output as it is, and its exit code decides the outcome. With a format, the
runner reads stdout through that format's parser (`Transcript`): the job's
output is a readable transcript, and the job's result, error and usage come
from what the agent itself reported (`Outcome`). aider has no
machine-readable mode: `aider-text` reads its plain output (`aider.py`).
"""

from __future__ import annotations

from typing import Final

from mam.agents.formats.aider import AiderText
from mam.agents.formats.base import Outcome, StreamParser
from mam.agents.formats.claude import ClaudeStream
from mam.agents.formats.codex import CodexJson
from mam.agents.formats.gemini import GeminiStream
from mam.agents.formats.transcript import Transcript

FORMATS: Final[dict[str, type[StreamParser]]] = {
    parser.name: parser for parser in (ClaudeStream, CodexJson, GeminiStream, AiderText)
}


def parser_for(name: str) -> StreamParser:
    """A fresh parser for one job's stream; `KeyError` for a format no parser reads."""
    return FORMATS[name]()


__all__ = ["FORMATS", "Outcome", "StreamParser", "Transcript", "parser_for"]
