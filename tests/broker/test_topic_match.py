"""mam-broker's compiled topic filters agree with amqtt's own matching, case for case."""

from __future__ import annotations

import logging

import pytest
from amqtt.broker import Broker
from hypothesis import given, settings
from hypothesis import strategies as st

from mam.broker.topic_match import matches

FILTER_LEVELS = st.sampled_from(["a", "b", "", "+", "#", "$SYS", "a+", "#b", "x.y", "é", "(.*)"])
TOPIC_LEVELS = st.sampled_from(["a", "b", "", "$SYS", "x.y", "é", "a+", "(.*)", "x\ny"])


class _AmqttSelf:
    logger = logging.getLogger("amqtt-reference")


@settings(max_examples=3000)
@given(st.lists(FILTER_LEVELS, min_size=1, max_size=5), st.lists(TOPIC_LEVELS, min_size=1, max_size=5))
@pytest.mark.slow
def test_a_compiled_filter_matches_exactly_what_amqtt_matches(
    filter_levels: list[str], topic_levels: list[str]
) -> None:
    a_filter, topic = "/".join(filter_levels), "/".join(topic_levels)
    assert matches(topic, a_filter) == Broker._matches(_AmqttSelf(), topic, a_filter), (topic, a_filter)  # type: ignore[arg-type]  # noqa: SLF001


@pytest.mark.fast
def test_the_cases_mam_relies_on() -> None:
    assert matches("mam/w/jobs/j/events", "mam/w/jobs/+/events")
    assert not matches("mam/w/jobs/j/state", "mam/w/jobs/+/events")
    assert matches("mam/w", "mam/w/#") and matches("mam/w/jobs/j/state", "mam/w/#")
    assert not matches("mam/ww/jobs/j/state", "mam/w/#")
    assert not matches("$SYS/broker/uptime", "#") and matches("$SYS/broker/uptime", "$SYS/#")
