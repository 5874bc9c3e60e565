"""A job stopped before its agent's result (cancelled, timed out, handed back) records the usage the agent's
stream reported until then: claude's API calls' stream events carry their tokens (issue 23). The parser on
lines in Claude Code's shape, then the real Claude Code cancelled mid-answer (a job cancelled after a tool call, per
CLI: tests/agents/test_agent_formats.py)."""

from __future__ import annotations

import json

import anyio
import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig
from runner_support import submit

from mam.agents.formats.claude import ClaudeStream

from e2e import workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths


def assistant(message_id: str, output_tokens: int, text: str = "x") -> str:
    return json.dumps(
        {
            "type": "assistant",
            "session_id": "s-1",
            "message": {
                "id": message_id,
                "content": [{"type": "text", "text": text}],
                "usage": {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": 10,
                    "cache_read_input_tokens": 100,
                    "output_tokens": output_tokens,
                },
            },
        }
    )


def api_event(event: dict) -> str:
    return json.dumps({"type": "stream_event", "session_id": "s-1", "event": event})


@pytest.mark.fast
def test_each_api_call_counts_once_with_its_latest_stream_usage_and_lines_do_not_add_to_it() -> None:
    """With --include-partial-messages: message_start's usage, then message_delta's cumulative counts; the
    assistant line repeating message_start's usage (output 1) counts nothing more."""
    parser = ClaudeStream()
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "usage": {
                "input_tokens": 1000,
                "cache_read_input_tokens": 500,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    }
    for line in (
        api_event(start),
        assistant("msg_1", 1),
        api_event({"type": "message_delta", "usage": {"output_tokens": 12}}),
        api_event({"type": "message_delta", "usage": {"output_tokens": 20}}),
        api_event({**start, "message": {"id": "msg_2", "usage": {"input_tokens": 1200, "output_tokens": 1}}}),
        assistant("msg_0", 4),
    ):  # a message without stream events (a subagent's) counts by its line
        parser.line(line)
    usage = parser.outcome().usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1500 + 1200 + 113, 600, 25)


@pytest.mark.fast
def test_each_message_counts_once_with_its_last_lines_usage() -> None:
    """Claude Code writes a line per content block of a message, repeating its id and usage, the output
    count growing to the final one on its last line."""
    parser = ClaudeStream()
    for line in (
        assistant("msg_1", 1),
        assistant("msg_1", 1),
        assistant("msg_1", 30),  # one message, 3 blocks
        assistant("msg_2", 5),
        assistant("msg_2", 7),
    ):
        parser.line(line)
    outcome = parser.outcome()
    assert not outcome.complete and outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.cached_input_tokens, outcome.usage.output_tokens) == (
        2 * 113,
        200,
        37,
    )
    assert outcome.usage.cost_usd is None and outcome.usage.agent_session_id == "s-1"


LONG_ANSWER = " ".join(f"word{i}" for i in range(400))


async def test_a_real_claude_cancelled_mid_answer_records_the_usage_it_was_sent(ws: WorkspacePaths) -> None:
    """Claude Code 2.1.197 against the model server: a tool call (1000 in + 500 cached, 20 out), then a long
    answer streamed slowly (1200 in); the job is cancelled while it streams. Recorded: both calls' input and
    the first call's 20 output tokens, as the API's message_start/message_delta said (before: its assistant
    lines' 1500 in / 1 out, message_start's output count, and nothing of the call in progress)."""
    script = Script(
        [
            Turn(
                tool="Bash",
                args={"command": "ls", "description": "list"},
                input_tokens=1000,
                output_tokens=20,
                cached_tokens=500,
            ),
            Turn(text=LONG_ANSWER, input_tokens=1200, output_tokens=400, pause=0.2),
        ]
    )
    async with real_rig(CLIS["claude-code"], ws, script) as rig:
        await submit(rig.url, ws, "job-long", "list, then say a lot", agent="claude-code")
        assert await anyio.to_thread.run_sync(script.streaming.wait, 60), "the long answer never started"
        cancel = await run(
            mam("cancel", "job-long", "--broker", rig.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert cancel.returncode == 0, cancel.stderr
        record = await wait_for_state(
            rig.url, workspace_id(ws.root), "job-long", lambda r: r["status"] == "cancelled", timeout=60
        )
    usage = record["usage"]
    assert usage.pop("agent_session_id")
    assert usage == {"input_tokens": 2700, "output_tokens": 21, "cached_input_tokens": 500}, usage
