"""An agent's retry notices: shown in its transcript, counted apart from its progress (agents/idle.py).

The lines are the real CLIs' (Claude Code 2.1.197 and Codex 0.171.0 against a local server answering 401 or
500: tests/real_agents/test_real_agent_stalls.py runs them through mam).
"""

from __future__ import annotations

import pytest

from mam.agents.formats import Transcript, parser_for
from mam.agents.idle import IdleClock, Progress

pytestmark = pytest.mark.fast

CLAUDE_INIT = '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","tools":[],"model":"claude-opus-4-8"}'
CLAUDE_RETRY = (
    '{"type":"system","subtype":"api_retry","attempt":%d,"max_retries":10,"retry_delay_ms":577.36,'
    '"error_status":401,"error":"authentication_failed","session_id":"s-1","uuid":"u-%d"}'
)
CLAUDE_RESULT = (
    '{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"num_turns":1,'
    '"result":"Invalid API key · Fix external API key","session_id":"s-1","total_cost_usd":0}'
)


def test_claudes_api_retry_lines_are_shown_one_line_each_and_counted_as_notices() -> None:
    transcript = Transcript(parser_for("claude-stream-json"))
    shown = transcript.feed("\n".join([CLAUDE_INIT, CLAUDE_RETRY % (1, 1), CLAUDE_RETRY % (2, 2), CLAUDE_RESULT, ""]))
    assert shown.splitlines() == [
        "[claude session s-1, model claude-opus-4-8]",
        "! claude: API error 401 (authentication_failed), retry 1 of 10 in 0.6 s",
        "! claude: API error 401 (authentication_failed), retry 2 of 10 in 0.6 s",
        "✗ claude: Invalid API key · Fix external API key",
    ]
    assert (transcript.lines, transcript.parser.notices, transcript.progress) == (4, 2, 2)
    assert transcript.parser.last_notice == "! claude: API error 401 (authentication_failed), retry 2 of 10 in 0.6 s"
    assert transcript.parser.outcome().error == "Invalid API key · Fix external API key"


def test_a_retry_without_a_response_or_with_odd_values_is_still_one_line() -> None:
    parser = parser_for("claude-stream-json")
    assert (
        parser.line('{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":500}')
        == "! claude: no response from the API, retry 1 of 1 in 0.5 s\n"
    )
    assert (
        parser.line('{"type":"system","subtype":"api_retry","error":"a\\nb","retry_delay_ms":-1}')
        == "! claude: no response from the API (a b), retry\n"
    )
    assert parser.notices == 2


async def test_notices_do_not_reset_the_idle_clock_and_the_last_one_is_in_the_reason() -> None:
    """Codex's `error` events ("Reconnecting... 1/5") are notices: after progress, only notices leave the clock
    where the progress set it, and the reason names the last; a plain command's text is all progress."""
    clock = IdleClock(600)
    transcript = Transcript(parser_for("codex-json"))
    watched = Progress(clock, transcript, transcript)
    watched.feed('{"type":"thread.started","thread_id":"t-1"}\n{"type":"turn.started"}\n')
    clock.last = -1.0  # as if the progress was long ago: a notice must not move it
    shown = watched.feed('{"type":"error","message":"Reconnecting... 1/5 (high demand)"}\n')
    assert shown == "! codex: Reconnecting... 1/5 (high demand)\n"
    assert clock.last == -1.0
    assert clock.reason() == (
        "no progress for 600s (mam-agent --idle-timeout); the agent's last notice: "
        "! codex: Reconnecting... 1/5 (high demand)"
    )
    watched.feed('{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"hi"}}\n')
    assert clock.last > -1.0 and clock.notice is None
    assert clock.reason() == "no progress for 600s (mam-agent --idle-timeout)"

    plain = IdleClock(5)
    plain.last = -1.0
    assert Progress(plain).feed("Attempt 1 failed with status 500. Retrying with backoff...\n")
    assert plain.last > -1.0, "a plain command's every line is progress: mam cannot tell its notices"
