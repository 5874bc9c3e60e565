"""`mam up` keeps a client's retained messages only on the topics mam retains (broker/retain_scope.py).

A retained publish or will elsewhere (another topic tree, another workspace, a job's events) is
delivered live but not kept, and said once per client in `mam up`'s log; a runner's retained
status is kept as before. `mam-broker` keeps every retained message (tests/broker/test_amqtt_gaps.py).
"""

from __future__ import annotations

import json
import socket
import uuid

import anyio
from keepalive_support import connect_packet
from raw_mqtt import up_process

from e2e import workspace_id
from support import Watch, _client, messages
from workspace_support import WorkspacePaths


async def test_a_clients_retained_message_outside_mams_topics_is_delivered_live_and_not_kept(
    ws: WorkspacePaths,
) -> None:
    ws_id = workspace_id(ws.root)
    foreign = [
        "elsewhere/a",
        "elsewhere/b",
        f"mam/other-{ws_id[:8]}/agents/r1/status",
        f"mam/{ws_id}/jobs/j/events",
        f"mam/{ws_id}/notes/x",
    ]
    runner = f"mam/{ws_id}/agents/r1/status"
    client_id = f"retainer-{uuid.uuid4().hex[:6]}"
    async with up_process(ws) as (daemon, port):
        url = f"mqtt://127.0.0.1:{port}"
        async with Watch(url, "elsewhere/#") as live:
            async with _client(url, identifier=client_id) as client:
                for topic in foreign:
                    await client.publish(topic, b"x" * 1000, qos=1, retain=True)
                await client.publish(runner, json.dumps({"status": "online"}).encode(), qos=1, retain=True)
            got = [await live.next(lambda t, _, want=want: t == want) for want in ("elsewhere/a", "elsewhere/b")]
            assert [p for _, p in got] == [b"x" * 1000] * 2, "delivered live to a subscriber"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:  # a retained will, gone abruptly
            sock.sendall(connect_packet("will-retainer", will=("elsewhere/will", b"gone", True)))
            assert sock.recv(4)[:1] == b"\x20"
        # A new subscriber: the runner's status is replayed (its filter comes last in the one SUBSCRIBE, and
        # amqtt replays each filter's retained messages in order), nothing of the others.
        async with _client(url) as reader:
            await reader.subscribe([(t, 1) for t in [*foreign, "elsewhere/will"]] + [(runner, 1)])
            with anyio.fail_after(10):
                async for message in messages(reader):
                    assert str(message.topic) == runner, f"kept: {message.topic}"
                    break
        output = daemon.output()
        said = [line for line in output.splitlines() if "not a topic mam retains" in line]
        assert len([line for line in said if client_id in line]) == 1, output[-2000:]
        assert "'elsewhere/a'" in said[0] and "delivered live, not kept" in said[0]
