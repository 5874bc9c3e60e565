"""Opening aiomqtt clients from a `BrokerAddress`, with errors a person can act on (several
brokers: `mam.client.failover`)."""

from __future__ import annotations

import logging
from typing import Any

import aiomqtt
import paho.mqtt.client as paho

from mam.client.inbox import Inbox
from mam.client.tls import client_context, describe_failure
from mam.contract.broker_list import BrokerList
from mam.contract.broker_url import BrokerAddress
from mam.contract.errors import BrokerUnreachable


class _TlsClient(aiomqtt.Client):
    """An aiomqtt client for a TLS broker whose connect fails at once, with paho's reason, when the
    connection drops before CONNACK. Under TLS 1.3 a broker that wants a client certificate
    (mosquitto's `require_certificate`) lets the handshake finish and then sends an alert; paho
    logs "failed to receive on socket: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] ..." and
    aiomqtt 2.x ignores a disconnect before CONNACK (`_on_disconnect` returns early), so the
    connect only timed out, seconds later, as "Operation timed out"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("logger", _QUIET)  # the reason travels in the exception instead of a log line
        super().__init__(*args, **kwargs)
        self._last_error: str | None = None
        self._client.on_log = self._on_log

    def _on_log(self, client: Any, userdata: Any, level: int, text: str) -> None:  # noqa: ARG002 - paho's signature
        if level == paho.MQTT_LOG_ERR:
            self._last_error = text

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any = None) -> None:
        if not self._connected.done():
            self._connected.set_exception(aiomqtt.MqttError(self._last_error or "the broker closed the connection"))
            return
        super()._on_disconnect(client, userdata, flags, reason_code, properties)


_QUIET = logging.getLogger("mam.mqtt.tls_paho")
_QUIET.setLevel(logging.CRITICAL)


def make_client(address: BrokerAddress, **kwargs: Any) -> aiomqtt.Client:
    """An aiomqtt client for `address`; `kwargs` pass through to `aiomqtt.Client`. Its messages queue
    up in an `Inbox`: read them with `mam.client.inbox.messages(client)`, never `client.messages` (see there)."""
    kwargs.setdefault("queue_type", Inbox)
    kind = aiomqtt.Client
    if address.tls:
        kind = _TlsClient
        if "tls_context" not in kwargs:
            kwargs["tls_context"] = client_context()  # the system's CAs, plus --cafile / $MAM_CAFILE, a client cert
    return kind(
        address.host,
        address.port,
        username=address.username,
        password=address.password,
        **kwargs,
    )


def unreachable(address: BrokerAddress | BrokerList, exc: BaseException) -> BrokerUnreachable:
    """The one-line error for a broker (or every broker of a list) we could not talk to."""
    detail = str(exc) or type(exc).__name__
    several = isinstance(address, BrokerList) and len(address) > 1
    if "not authori" in detail.lower() or "bad user name or password" in detail.lower():
        return BrokerUnreachable(
            f"broker {address.url} refused the credentials ({detail}): check user:pass in --broker or MAM_BROKER_URL"
        )
    if (tls := describe_failure(detail, address.url)) is not None and (address.url.startswith("mqtts") or several):
        return BrokerUnreachable(tls)
    where = f"any of the MQTT brokers {address.url}" if several else f"the MQTT broker at {address.url}"
    return BrokerUnreachable(
        f"cannot reach {where} ({detail}): start one with `mam up`, or pass --broker / set MAM_BROKER_URL"
    )
