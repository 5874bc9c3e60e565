"""Opening aiomqtt clients from a `BrokerAddress`, with errors a person can act on (several
brokers: `mam.client.failover`)."""

from __future__ import annotations

import logging
from typing import Any

import aiomqtt

from mam.client.aiomqtt_internals import NO_DELAY, TlsClient, check_client
from mam.client.inbox import Inbox
from mam.client.outage import why
from mam.client.tls import client_context, describe_failure
from mam.contract.broker_list import BrokerList
from mam.contract.broker_url import BrokerAddress
from mam.contract.errors import BrokerUnreachable


class LibraryChatter(logging.Filter):
    """What aiomqtt and paho-mqtt log about a connection mam already speaks of, taken off the log (`-vv`
    shows it as debug lines, without tracebacks):

    - "Unexpected message ID ... in on_unsubscribe callback" (aiomqtt's `_on_subscribe`, `_on_unsubscribe`),
      an exception with a traceback whenever a SUBACK or UNSUBACK comes for a call nobody awaits any more:
      what happens whenever a task that (un)subscribes is cancelled, e.g. a runner's at SIGTERM. The broker
      did what was asked; only the caller left.
    - "There are 45 pending publish calls." (aiomqtt's `_pending_call`), once per publish while more than
      ten await the broker: a runner sending what it queued during an outage logged it thousands of
      times. The runner says the count once itself (`mam.client.outage`).
    - "failed to receive on socket: ..." and "timeout on socket: ..." (paho's), the lost connection that
      the process says once, in mam's words, as it rides it out.
    """

    CHATTER = (
        "Unexpected message ID",
        "There are %d pending publish calls",
        "failed to receive on socket",
        "timeout on socket",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.CHATTER):
            return True
        record.levelno, record.levelname, record.exc_info, record.exc_text = logging.DEBUG, "DEBUG", None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


LateAcknowledgements = LibraryChatter
"""Its older name."""

_MQTT_LOGGER = logging.getLogger("mqtt")  # aiomqtt's default logger (aiomqtt.client.MQTT_LOGGER), paho's through it
if not any(isinstance(f, LibraryChatter) for f in _MQTT_LOGGER.filters):
    _MQTT_LOGGER.addFilter(LibraryChatter())


def make_client(address: BrokerAddress, **kwargs: Any) -> aiomqtt.Client:
    """An aiomqtt client for `address`; `kwargs` pass through to `aiomqtt.Client`. Its messages queue
    up in an `Inbox`: read them with `mam.client.inbox.messages(client)`, never `client.messages` (see there).

    Its writes go out at once (`TCP_NODELAY`): paho leaves Nagle's algorithm on (its `socket_options` are
    empty unless given; mosquitto's own clients turn it off), and a client that acknowledges a QoS 1
    message and then sends its next request (a PUBACK for a retained status, then a SUBSCRIBE or a
    PUBLISH) had that request held until the broker's delayed ACK of the PUBACK: about 40 ms on Linux,
    half of a `mam submit`'s time on the wire."""
    kwargs.setdefault("queue_type", Inbox)
    kwargs.setdefault("socket_options", NO_DELAY)
    kind = aiomqtt.Client
    if address.tls:
        kind = TlsClient
        if "tls_context" not in kwargs:
            kwargs["tls_context"] = client_context()  # the system's CAs, plus --cafile / $MAM_CAFILE, a client cert
    client = kind(
        address.host,
        address.port,
        username=address.username,
        password=address.password,
        **kwargs,
    )
    check_client(client)  # LibraryChanged if aiomqtt or paho-mqtt lacks what mam reaches into
    return client


def unreachable(address: BrokerAddress | BrokerList, exc: BaseException) -> BrokerUnreachable:
    """The one-line error for a broker (or every broker of a list) we could not talk to."""
    raw, detail = str(exc) or type(exc).__name__, why(exc)
    several = isinstance(address, BrokerList) and len(address) > 1
    if "not authori" in raw.lower() or "bad user name or password" in raw.lower():
        return BrokerUnreachable(
            f"broker {address.url} refused the credentials ({detail}): check user:pass in --broker or MAM_BROKER_URL"
        )
    if (tls := describe_failure(raw, address.url)) is not None and (address.url.startswith("mqtts") or several):
        return BrokerUnreachable(tls)
    where = f"any of the MQTT brokers {address.url}" if several else f"the MQTT broker at {address.url}"
    return BrokerUnreachable(
        f"cannot reach {where} ({detail}): start one with `mam up`, or pass --broker / set MAM_BROKER_URL"
    )
