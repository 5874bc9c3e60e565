"""Manual PUBACK for aiomqtt: acknowledge an event only once it is durable.

aiomqtt acknowledges every QoS 1 message on receipt and does not expose
paho-mqtt's manual acknowledgement. It builds a `paho.mqtt.client.Client`,
though, and paho has `manual_ack_set(True)` and `ack(mid, qos)`. This module is
the one place that reaches into aiomqtt's private `_client` for them, so if
aiomqtt ever changes its internals, only this file changes.

`enable_manual_ack` must run before the client connects: a persistent session
may be handed queued messages right after CONNACK.
"""

from __future__ import annotations

import aiomqtt
import paho.mqtt.client as paho


def _paho(client: aiomqtt.Client) -> paho.Client:
    inner = getattr(client, "_client", None)
    if not isinstance(inner, paho.Client):
        raise RuntimeError("this aiomqtt version hides its paho client; manual acknowledgement is unavailable")
    return inner


def enable_manual_ack(client: aiomqtt.Client) -> None:
    _paho(client).manual_ack_set(True)


def ack(client: aiomqtt.Client, message: aiomqtt.Message) -> None:
    """Send the PUBACK for `message` (nothing for QoS 0)."""
    if message.qos > 0:
        _paho(client).ack(message.mid, message.qos)
