"""A lost broker in mam's words (`mam.client.outage`), once an outage; the MQTT libraries' chatter off the log."""

from __future__ import annotations

import errno
import logging
import socket

import aiomqtt
import anyio
import pytest
from aiomqtt.exceptions import MqttCodeError, MqttConnectError
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from mam.client.failover import NoBrokerAnswered
from mam.client.mqtt import LibraryChatter, make_client, unreachable
from mam.client.outage import LIBRARY_TEXTS, Outage, why
from mam.contract.broker_url import parse_broker_url

from brokers import RunningBroker, free_port

LIBRARY_WORDS = (
    "Errno",
    "code:",
    "Disconnected during",
    "Operation timed out",
    "Unspecified error",
    "Unexpected disconnection",
)


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    """`outer`, raised from `cause` (as aiomqtt and mam's inbox chain them)."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as raised:  # noqa: BLE001 - the test builds the chain it reads
        return raised


def _disconnect(reason: str) -> MqttCodeError:
    return MqttCodeError(ReasonCode(PacketTypes.DISCONNECT, reason), "Unexpected disconnection")


@pytest.mark.fast
@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (aiomqtt.MqttError("[Errno 111] Connection refused"), "connection refused"),
        (aiomqtt.MqttError("[Errno 104] Connection reset by peer"), "the connection was reset"),
        (aiomqtt.MqttError("[Errno 113] No route to host"), "no route to the host"),
        (aiomqtt.MqttError("[Errno -2] Name or service not known"), "cannot resolve the host name"),
        (aiomqtt.MqttError("[Errno 24] Too many open files"), "too many open files"),
        (aiomqtt.MqttError("Operation timed out"), "the broker did not answer in time"),
        (aiomqtt.MqttError("Disconnected during message iteration"), "the connection dropped"),
        (
            _chained(aiomqtt.MqttError("the connection dropped"), _disconnect("Unspecified error")),
            "the connection dropped",
        ),
        (
            _chained(aiomqtt.MqttError("Disconnected during message iteration"), _disconnect("Keep alive timeout")),
            "the broker stopped answering (keepalive)",
        ),
        (
            _chained(aiomqtt.MqttError("the connection dropped"), _disconnect("Session taken over")),
            "another client took over this client's session (the same client id)",
        ),
        (MqttConnectError(ReasonCode(PacketTypes.CONNACK, "Not authorized")), "not authorised"),
        (MqttCodeError(7, "Could not publish message"), "the connection dropped"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "cannot resolve the host name"),
        (aiomqtt.MqttError("the broker closed the connection"), "the broker closed the connection"),
    ],
)
def test_what_the_libraries_raise_is_said_in_mams_words(raised: BaseException, said: str) -> None:
    assert why(raised) == said


@pytest.mark.fast
def test_several_brokers_are_each_said_in_mams_words() -> None:
    a, b = parse_broker_url("mqtt://127.0.0.1:9"), parse_broker_url("mqtt://127.0.0.1:7")
    failed = NoBrokerAnswered(
        [(a, aiomqtt.MqttError("[Errno 111] Connection refused")), (b, aiomqtt.MqttError("Operation timed out"))]
    )
    assert (
        why(failed) == "mqtt://127.0.0.1:9: connection refused; mqtt://127.0.0.1:7: the broker did not answer in time"
    )


@pytest.mark.fast
@given(st.integers(min_value=-20, max_value=200), st.text(max_size=40))
def test_no_errno_or_code_of_a_library_is_ever_shown(number: int, text: str) -> None:
    for raised in (aiomqtt.MqttError(f"[Errno {number}] {text}"), MqttCodeError(number, text)):
        said = why(raised)
        assert said and "[Errno" not in said and "[code:" not in said, (raised, said)


@pytest.mark.fast
@given(
    st.text(min_size=1, max_size=80).filter(
        lambda t: t.strip() and not t.lstrip().startswith("[") and t.strip().lower() not in LIBRARY_TEXTS
    )
)
def test_a_message_of_mams_own_is_kept_as_it_is(text: str) -> None:
    assert why(aiomqtt.MqttError(text)) == text.strip()


@pytest.mark.fast
def test_an_outage_is_said_once_when_it_begins_and_once_when_it_ends() -> None:
    outage, url = Outage(), "mqtt://127.0.0.1:1883"
    first = outage.lost(url, aiomqtt.MqttError("Disconnected during message iteration"), "reconnecting")
    assert first == f"lost the broker at {url}: the connection dropped; reconnecting"
    assert outage.lost(url, aiomqtt.MqttError("[Errno 111] Connection refused"), "reconnecting") is None
    back = outage.back(url, "sending 3 queued event(s)")
    assert (
        back is not None
        and back.startswith(f"reconnected to {url} after ")
        and back.endswith("; sending 3 queued event(s)")
    ), back
    assert outage.back(url) is None
    assert outage.lost(url, aiomqtt.MqttError("[Errno 111] Connection refused"), "reconnecting") == (
        f"lost the broker at {url}: connection refused; reconnecting"
    )
    assert outage.count == 2


async def test_cannot_reach_says_why_in_mams_words() -> None:
    address = parse_broker_url(f"mqtt://127.0.0.1:{free_port()}")
    with pytest.raises(aiomqtt.MqttError) as refused:
        async with make_client(address):
            pass
    said = str(unreachable(address, refused.value))
    assert said.startswith(f"cannot reach the MQTT broker at {address.url} (connection refused): start one"), said
    assert not any(words in said for words in LIBRARY_WORDS), said


async def _publish_at_once(url: str, count: int) -> None:
    async with make_client(parse_broker_url(url)) as client:
        async with anyio.create_task_group() as tg:
            for n in range(count):
                tg.start_soon(lambda n=n: client.publish(f"mam-test/chatter/{n}", b"x", qos=1))


async def test_many_publishes_in_flight_log_nothing_of_aiomqtts(
    mosquitto: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """aiomqtt warns "There are N pending publish calls." once per publish while more than ten await the
    broker: a runner catching up after an outage logged it thousands of times. Without the filter aiomqtt
    still says it (so a change of its wording fails here), with it nothing reaches the log."""
    chatty = logging.getLogger("mqtt")
    [installed] = [f for f in chatty.filters if isinstance(f, LibraryChatter)]
    chatty.removeFilter(installed)
    try:
        with caplog.at_level(logging.WARNING):
            await _publish_at_once(mosquitto.url, 30)
    finally:
        chatty.addFilter(installed)
    assert any(
        r.getMessage().startswith("There are ") and "pending publish calls" in r.getMessage() for r in caplog.records
    ), "aiomqtt no longer warns so: LibraryChatter.CHATTER is out of date"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await _publish_at_once(mosquitto.url, 30)
    assert [r.getMessage() for r in caplog.records if r.name == "mqtt"] == []
