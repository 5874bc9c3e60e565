"""`mam up` queues QoS 1 messages for an offline persistent session, anonymous or not (MQTT-3.1.2-5).

amqtt's anonymous plugin marks every session anonymous, and amqtt then neither
queues for it offline nor keeps its subscriptions; mam's broker clears the mark
under `mam up` (`mam.broker.acl.WillPlugin`). Paho's `test_offline_message_queueing`.
"""

from __future__ import annotations

import uuid

from test_amqtt_gaps import first_message
from test_broker_acl import up

from mam.broker_url import parse_broker_url
from mam.mqtt import make_client

from conftest import WorkspacePaths
from support import publish


async def test_mam_up_queues_for_an_offline_persistent_session(ws: WorkspacePaths) -> None:
    async with up(ws) as (port, _):
        url, client_id, topic = f"mqtt://127.0.0.1:{port}", f"offline-{uuid.uuid4().hex[:8]}", "queued/while-away"
        async with make_client(parse_broker_url(url), identifier=client_id, clean_session=False) as client:
            await client.subscribe(topic, qos=1)
        await publish(url, topic, b"while-away")
        assert await first_message(url, topic, client_id=client_id) == b"while-away"
