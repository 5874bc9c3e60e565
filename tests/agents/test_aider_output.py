"""aider's plain output read by its format (`aider-text`, agents/formats/aider.py): the reply as the job's result,
the usage lines summed, a failed model call as notices or, given up, as the error.

The parser reads what the real aider 0.86.2 printed through the built-in profile (tests/agent_streams/aider*.txt,
recorded by its capture.py against the scripted OpenAI server); the usage lines of a model whose price aider
knows, which no local server makes it print, are aider's own format strings (aider/coders/base_coder.py).
"""

from __future__ import annotations

import pytest

from mam.agents.formats import Transcript, parser_for
from mam.agents.formats.aider import AiderText, tokens
from mam.agents.formats.base import Outcome
from mam.agents.formats.verdict import verdict
from mam.contract import events as ev

from support import TESTS

pytestmark = pytest.mark.fast

BANNER = [
    "Aider v0.86.2",
    "Model: openai/mam-test-model with whole edit format",
    "Git repo: none",
    "Repo-map: disabled",
    "",
]


def recorded(name: str) -> str:
    return (TESTS / "agent_streams" / f"{name}.txt").read_text(encoding="utf-8")


def read(text: str) -> tuple[str, AiderText]:
    transcript = Transcript(parser_for("aider-text"))
    shown = transcript.feed(text) + transcript.end()
    assert isinstance(transcript.parser, AiderText)
    return shown, transcript.parser


def test_the_reply_is_the_result_and_the_usage_line_the_usage_not_the_warnings_before_the_banner() -> None:
    """Before: the job's result was the tail of stdout, which began with aider's failed fetch of litellm's price
    list (`HTTPSConnectionPool(host='raw.githubusercontent.com', ...)`), and no usage was recorded."""
    text = recorded("aider")
    shown, parser = read(text)
    assert shown == text, "every line is shown as aider printed it"
    outcome = parser.outcome()
    assert outcome == Outcome(
        complete=True,
        result="Two files: a.txt and b.txt.\n\n- **a.txt** says hello",
        usage=ev.Usage(input_tokens=596, output_tokens=17, cached_input_tokens=0),
    )
    assert verdict(outcome, program="aider", code=0, stderr="", git=None) == ev.Succeeded(
        exit_code=0, result=outcome.result, usage=outcome.usage
    )


def test_a_retried_call_is_notices_and_the_answer_after_it_is_the_result() -> None:
    shown, parser = read(recorded("aider-retried"))
    assert parser.outcome().result == "Answered after a retry."
    assert parser.notices == 4, "the exception (two lines at 80 columns), aider's explanation, its retry"
    assert parser.last_notice == "Retrying in 0.2 seconds..."
    assert "litellm.InternalServerError" in shown


def test_a_call_aider_gives_up_on_is_the_error_though_it_exits_0() -> None:
    outcome = read(recorded("aider-api-error"))[1].outcome()
    assert outcome == Outcome(complete=True, error="litellm.BadRequestError: OpenAIException - bad key here")
    failed = verdict(outcome, program="aider", code=0, stderr="", git=None)
    assert isinstance(failed, ev.Failed) and failed.error == outcome.error


def test_usage_lines_with_cache_parts_and_cost_are_summed_over_the_calls_and_the_last_reply_is_the_result() -> None:
    """Two model calls (an edit, then aider's reflection on a lint error): the format strings of
    `calculate_and_show_tokens_and_cost`, cost on the same line or, with both cache parts, the next."""
    lines = [
        *BANNER,
        "First reply.",
        "",
        "Tokens: 1.2k sent, 45 received. Cost: $0.0012 message, $0.0012 session.",
        "Applied edit to a.py",
        "Second reply,",
        "on two lines.",
        "",
        "Tokens: 12k sent, 300 cache write, 10k cache hit, 345 received.",
        "Cost: $0.0123 message, $0.0135 session.",
    ]
    outcome = read("".join(f"{line}\n" for line in lines))[1].outcome()
    assert outcome.usage == ev.Usage(cost_usd=0.0135, input_tokens=13200, output_tokens=390, cached_input_tokens=10000)
    assert outcome.result == "Applied edit to a.py\nSecond reply,\non two lines.", "after the usage line before it"


def test_a_usage_line_rich_wrapped_at_80_columns_is_read_whole() -> None:
    lines = [
        *BANNER,
        "The reply.",
        "Tokens: 12k sent, 10k cache hit, 345 received. Cost: $0.0123 message, $0.0456",
        "session.",
    ]
    outcome = read("\n".join(lines))[1].outcome()
    assert outcome.usage == ev.Usage(cost_usd=0.0456, input_tokens=12000, output_tokens=345, cached_input_tokens=10000)
    assert outcome.result == "The reply."


def test_a_run_without_a_usage_line_is_incomplete_with_the_last_thing_aider_said() -> None:
    outcome = read("".join(f"{line}\n" for line in [*BANNER, "Half a rep"]))[1].outcome()
    assert outcome == Outcome(complete=False, error="Half a rep")
    cut = verdict(outcome, program="aider", code=-15, stderr="", git=None)
    assert isinstance(cut, ev.Failed)
    assert cut.error == "aider stopped before it reported a result (exit code -15): Half a rep"


@pytest.mark.parametrize(("said", "count"), [("45", 45), ("1.2k", 1200), ("12k", 12000), (None, 0)])
def test_tokens_reads_aiders_rounded_counts(said: str | None, count: int) -> None:
    assert tokens(said) == count


def test_how_the_pipe_cuts_the_output_changes_nothing() -> None:
    text = recorded("aider-retried")
    whole, parser = read(text)
    for size in (1, 7, 80, 1000):
        transcript = Transcript(parser_for("aider-text"))
        shown = "".join(transcript.feed(text[i : i + size]) for i in range(0, len(text), size)) + transcript.end()
        assert shown == whole and transcript.parser.outcome() == parser.outcome(), size
