"""A NATS cluster for the failover tests: three nodes with JetStream and MQTT on free loopback ports.

Each node runs docs/nats-cluster.conf (the configuration docs/brokers.md gives: every MQTT
stream on all three nodes) with its own store dir, server name, ports and
routes to the two others. Nodes are stopped by PID.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
import anyio

from brokers import free_port, require_binary, stop, wait_for_port

READY_TIMEOUT = 45.0
"""How long a fresh cluster may take to elect its leaders and make the MQTT streams."""


@dataclass
class Node:
    name: str
    mqtt_port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.mqtt_port}"

    def kill9(self) -> None:
        """Kill the node as a power cut would: no goodbye to its clients, no wills sent."""
        self.proc.kill()
        self.proc.wait(10)


@dataclass
class Cluster:
    nodes: list[Node]

    @property
    def url(self) -> str:
        """Every node, comma-separated, as `--broker` and `MAM_BROKER_URL` take them."""
        return ",".join(node.url for node in self.nodes)

    def node(self, url: str) -> Node:
        return next(node for node in self.nodes if node.url == url)


DOCUMENTED_CONF = Path(__file__).resolve().parent.parent / "docs" / "nats-cluster.conf"


def node_conf(name: str, *, client: int, route: int, mqtt: int, store: Path, routes: list[int]) -> str:
    """docs/nats-cluster.conf (node nats-1 of three) with only its name, ports, routes and store
    dir replaced, so the cluster docs/brokers.md recommends is the one the suite runs."""
    text = DOCUMENTED_CONF.read_text(encoding="utf-8")
    other_a, other_b = (f'"nats-route://127.0.0.1:{port}"' for port in routes)
    for documented, here in (
        ('server_name: "nats-1"', f'server_name: "{name}"'),
        ("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{client}"),
        ('store_dir: "/var/lib/nats"', f'store_dir: "{store}"'),
        ("listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{route}"),
        ('"nats-route://nats-2:6222"', other_a),
        ('"nats-route://nats-3:6222"', other_b),
        ("listen: 0.0.0.0:1883", f"listen: 127.0.0.1:{mqtt}"),
    ):
        assert text.count(documented) == 1, f"docs/nats-cluster.conf changed shape: {documented!r}"
        text = text.replace(documented, here)
    return text


@asynccontextmanager
async def nats_cluster(tmp: Path) -> AsyncIterator[Cluster]:
    """Start three nodes, yield the cluster once MQTT works end to end on every node, stop them all."""
    binary = require_binary("nats-server")
    ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
    nodes: list[Node] = []
    try:
        for i, (client, route, mqtt) in enumerate(ports):
            name = f"n{i}"
            store = tmp / f"nats-{name}"
            store.mkdir(parents=True, exist_ok=True)
            conf = tmp / f"nats-{name}.conf"
            others = [r for j, (_, r, _) in enumerate(ports) if j != i]
            conf.write_text(node_conf(name, client=client, route=route, mqtt=mqtt, store=store, routes=others))
            log = tmp / f"nats-{name}.log"
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [binary, "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            nodes.append(Node(name, mqtt, proc, log))
        for node in nodes:
            await anyio.to_thread.run_sync(wait_for_port, node.mqtt_port, node.proc)
        cluster = Cluster(nodes)
        with anyio.fail_after(READY_TIMEOUT):
            for node in nodes:
                await _until_mqtt_works(node)
        yield cluster
    finally:
        for node in nodes:
            stop(node.proc)


async def _until_mqtt_works(node: Node) -> None:
    """Until a QoS 1 publish on `node` comes back to a QoS 1 subscriber there: the leaders are
    elected and the MQTT streams exist (made, with their replicas, on the first connection)."""
    topic = f"mam-test/ready/{node.name}"
    while True:
        try:
            async with aiomqtt.Client("127.0.0.1", node.mqtt_port, identifier=f"ready-{node.name}", timeout=5) as c:
                await c.subscribe(topic, qos=1)
                await c.publish(topic, b"ready", qos=1)
                with anyio.fail_after(5):
                    async for message in c.messages:
                        if str(message.topic) == topic:
                            return
        except (aiomqtt.MqttError, TimeoutError):
            await anyio.sleep(0.2)  # retry backoff while the cluster forms
