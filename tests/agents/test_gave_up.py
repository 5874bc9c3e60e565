"""aider exits 0 after giving up on its message: when the runner reads that it gave up (agents/gave_up.py).

The text is aider 0.86.2's own output for a call refused with 401 (tests/real_agents/test_real_agent_stalls.py runs it)."""

from __future__ import annotations

import pytest

from mam.agents.gave_up import gave_up

pytestmark = pytest.mark.fast

REFUSED = (
    "Aider v0.86.2\nModel: openai/mam-test-model with whole edit format\n\n"
    "\x1b[31mlitellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect \n"
    "API key provided\x1b[0m\nThe API provider is not able to authenticate you. Check your API key.\n\n"
)


def test_aider_giving_up_after_an_api_error_is_one_plain_line() -> None:
    assert gave_up(["/opt/aider/bin/aider", "--yes-always"], REFUSED) == (
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided "
        "The API provider is not able to authenticate you. Check your API key."
    )


def test_a_retried_error_an_answer_or_another_command_is_not_giving_up() -> None:
    retried = "litellm.InternalServerError: OpenAIException - overloaded\nRetrying in 0.2 seconds...\nHello!\n"
    assert gave_up(["aider"], retried) is None, "aider retried, then answered"
    assert gave_up(["aider"], "Model: openai/x\n\nHello! How can I help?\n") is None
    assert gave_up(["sh", "-s"], REFUSED) is None, "only aider's output is read this way"
    assert gave_up(["aider"], REFUSED + "litellm.Timeout: timed out\nRetrying in 0.5 seconds...\n") is None
