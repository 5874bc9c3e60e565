"""Control characters from records are shown escaped, never sent to the reader's terminal."""

from __future__ import annotations

import json

import pytest

from mam.contract.terminal import safe

from brokers import RunningBroker
from e2e import projector_process
from support import mam, run
from workspace_support import WorkspacePaths

HOSTILE = "fix \x1b]0;pwned\x07 the \x1b[2J tests\r\x9b1m \u202eexe.txt"


@pytest.mark.fast
def test_safe_escapes_control_characters_and_keeps_layout_when_asked() -> None:
    assert safe("a\x1bb\x07c\x7f\x9b") == "a\\x1bb\\x07c\\x7f\\x9b"
    assert safe("line 1\nline 2\tend") == "line 1\nline 2\tend"
    assert safe("line 1\nline 2", keep_layout=False) == "line 1\\x0aline 2"
    assert safe("\u202eexe.txt \u2066x\u2069 \u200f") == "\\u202eexe.txt \\u2066x\\u2069 \\u200f"  # bidi controls


async def test_jobs_show_and_sessions_print_no_raw_control_characters(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        submitted = await run(
            mam(
                "submit",
                "--prompt",
                HOSTILE,
                "--agent",
                "a",
                "--agent-session",
                "s\x1b[31m",
                "--job-id",
                "esc",
                "--broker",
                amqtt.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert submitted.returncode == 0, submitted.stderr
    for command in (("jobs",), ("show", "esc"), ("jobs", "tree"), ("events", "esc"), ("session", "list")):
        result = await run(mam(*command, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert result.returncode == 0, (command, result.stderr)
        out = result.stdout.decode()
        assert not any(ch in out for ch in "\x1b\x07\r\x9b\u202e"), (command, out)
    shown = (await run(mam("show", "esc", "--workspace", str(ws.root)), cwd=ws.elsewhere)).stdout.decode()
    assert "\\x1b]0;pwned\\x07" in shown and "\\u202eexe.txt" in shown
    as_json = await run(mam("show", "esc", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert json.loads(as_json.stdout)["prompt"] == HOSTILE, "--json keeps the exact text"
