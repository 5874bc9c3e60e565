"""Overlong durations are usage errors everywhere: one line naming the value, exit 2, no traceback.

`99999999999999d` used to overflow the time arithmetic: a traceback from
`mam jobs --since` / `mam usage --since` / `mam prune --older-than`, an
`OverflowError` stopping `mam up` at every start when `.mam/config.json`
held it, and an MCP `list_jobs` error with no reason.
"""

from __future__ import annotations

import json

import pytest
from mcp_support import mcp_session, refused

from support import BIN, child_env, mam, run
from workspace_support import WorkspacePaths

OVERLONG = "99999999999999d"


def one_line(stderr: bytes) -> str:
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {stderr.decode()}"
    assert "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [("jobs", "--since", OVERLONG), ("usage", "--since", OVERLONG), ("prune", "--older-than", OVERLONG)],
    ids=["jobs-since", "usage-since", "prune-older-than"],
)
async def test_an_overlong_duration_on_the_command_line_is_a_usage_error(
    ws: WorkspacePaths, argv: tuple[str, ...]
) -> None:
    result = await run(mam(*argv, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert argv[1] in line and OVERLONG in line and "too long" in line, line


@pytest.mark.parametrize("key", ["older_than", "every"])
@pytest.mark.parametrize("command", ["mam up", "mam-projector"])
async def test_an_overlong_retention_in_the_config_is_refused_at_start_in_one_line(
    ws: WorkspacePaths, command: str, key: str
) -> None:
    config = ws.root / ".mam" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"retention": {"older_than": "30d", "every": "1h"} | {key: OVERLONG}}))
    argv = (
        mam("up", "--port", "0")
        if command == "mam up"
        else [str(BIN / "mam-projector"), "--broker", "mqtt://127.0.0.1:9"]
    )
    result = await run([*argv, "--workspace", str(ws.root)], cwd=ws.elsewhere, env=child_env(), timeout=20)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert str(config) in line and f"retention.{key}" in line and OVERLONG in line, line


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", '{"max_depth": 1e400}'])
async def test_a_config_that_is_not_what_mam_reads_is_refused_at_start_in_one_line(
    ws: WorkspacePaths, content: str
) -> None:
    config = ws.root / ".mam" / "config.json"
    config.parent.mkdir()
    config.write_text(content)
    result = await run(mam("up", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=20)
    assert result.returncode == 2, result.stderr
    assert str(config) in one_line(result.stderr)


async def test_mcp_list_jobs_names_an_overlong_since(ws: WorkspacePaths) -> None:
    async with mcp_session(ws) as session:
        reason = await refused(session, "list_jobs", since=OVERLONG)
    assert "since" in reason and OVERLONG in reason and "too long" in reason, reason
