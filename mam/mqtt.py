"""Opening aiomqtt clients from a `BrokerAddress`, with errors a person can act on (several
brokers: `mam.failover`)."""

from __future__ import annotations

import ssl
from typing import Any

import aiomqtt

from mam.broker_list import BrokerList
from mam.broker_url import BrokerAddress
from mam.errors import BrokerUnreachable
from mam.inbox import Inbox


def make_client(address: BrokerAddress, **kwargs: Any) -> aiomqtt.Client:
    """An aiomqtt client for `address`; `kwargs` pass through to `aiomqtt.Client`. Its messages queue
    up in an `Inbox`: read them with `mam.inbox.messages(client)`, never `client.messages` (see there)."""
    kwargs.setdefault("queue_type", Inbox)
    if address.tls:
        kwargs.setdefault("tls_context", ssl.create_default_context())
    return aiomqtt.Client(
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
    where = f"any of the MQTT brokers {address.url}" if several else f"the MQTT broker at {address.url}"
    return BrokerUnreachable(
        f"cannot reach {where} ({detail}): start one with `mam up`, or pass --broker / set MAM_BROKER_URL"
    )
