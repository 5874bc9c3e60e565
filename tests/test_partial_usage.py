"""A job stopped before its agent's result (cancelled, timed out, handed back) records the usage the agent's
stream reported until then: claude's assistant messages carry their API call's tokens (issue 23)."""

from __future__ import annotations

import json

from test_mcp import fake_clis
from test_runner_support import agent_runner, submit

from mam.agents.formats.claude import ClaudeStream

from brokers import free_port
from conftest import WorkspacePaths
from e2e import up_process, workspace_id
from support import Watch, mam, run, wait_for_state


def assistant(message_id: str, output_tokens: int, text: str = "x") -> str:
    return json.dumps({"type": "assistant", "session_id": "s-1", "message": {
        "id": message_id, "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 3, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 100,
                  "output_tokens": output_tokens}}})


def test_each_message_counts_once_with_its_last_lines_usage() -> None:
    """Claude Code writes a line per content block of a message, repeating its id and usage, the output
    count growing to the final one on its last line."""
    parser = ClaudeStream()
    for line in (assistant("msg_1", 1), assistant("msg_1", 1), assistant("msg_1", 30),  # one message, 3 blocks
                 assistant("msg_2", 5), assistant("msg_2", 7)):
        parser.line(line)
    outcome = parser.outcome()
    assert not outcome.complete and outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.cached_input_tokens, outcome.usage.output_tokens) == (
        2 * 113, 200, 37)
    assert outcome.usage.cost_usd is None and outcome.usage.agent_session_id == "s-1"


async def test_a_cancelled_claude_job_records_the_tokens_its_stream_reported(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, agent="claude-code", env=fake_clis()),
    ):
        async with Watch(url, f"mam/{ws_id}/jobs/job-c/events") as events:
            await submit(url, ws, "job-c", "hang after two messages", agent="claude-code")
            # The fake writes two assistant messages and a tool result, then hangs: once the tool result is
            # in the output, both messages' usage has been read.
            await events.json(lambda e: e.get("type") == "output" and "← total 8" in e.get("text", ""), timeout=20)
        cancel = await run(mam("cancel", "job-c", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert cancel.returncode == 0, cancel.stderr
        record = await wait_for_state(url, ws_id, "job-c", lambda r: r["status"] == "cancelled", timeout=20)
    usage = record["usage"]
    assert usage.pop("agent_session_id")
    assert usage == {"input_tokens": 2008, "output_tokens": 40, "cached_input_tokens": 2000}, usage
