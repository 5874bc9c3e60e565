"""mosquitto's own C clients: the ceiling a projector's rate is read against, and a publisher with no Python.

`mosquitto_pub -l -q 1 -M WINDOW` sends a topic's payloads (one per line, as fast as its window of
unacknowledged publishes lets it), one process per topic, so each topic's messages keep their order;
`mosquitto_sub -q 1` receives them. With C on both ends the figure is what the broker itself carries on
this machine: "the projector at a third of the C broker's QoS 1 rate" (issue 33) reads as the projector's
rate over this one, in the same run (`throughput.py`). The same publishers feed the projector and the
bare subscriber with `throughput.py --feed c`, so a Python publisher's own cost bounds neither.
"""

from __future__ import annotations

import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from _common import require_binary

PROBE = b"mam-bench-probe"
"""A message sent until the subscriber shows it, so the clock starts once it is subscribed."""


def address(port: int, topic: str) -> list[str]:
    return ["-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic]


def publish(port: int, streams: Mapping[str, list[bytes]], window: int, timeout: float = 120.0) -> None:
    """Publish each topic's payloads with a `mosquitto_pub -l` of its own, all at once; return when every
    one has sent its last (QoS 1: acknowledged by the broker)."""
    with ExitStack() as stack:
        publishers = []
        for topic, payloads in streams.items():
            if any(b"\n" in payload for payload in payloads):
                raise ValueError(f"mosquitto_pub -l sends a message per line: a payload for {topic} holds a newline")
            lines = stack.enter_context(tempfile.TemporaryFile())
            lines.write(b"".join(payload + b"\n" for payload in payloads))
            lines.seek(0)
            command = [require_binary("mosquitto_pub"), *address(port, topic), "-M", str(window), "-l"]
            publishers.append(subprocess.Popen(command, stdin=lines))
        for publisher in publishers:
            if publisher.wait(timeout) != 0:
                raise RuntimeError(f"mosquitto_pub exited with {publisher.returncode}")


@dataclass
class Subscriber:
    """A subscribed `mosquitto_sub` (its `pid`, for CPU time)."""

    pid: int
    process: subprocess.Popen[bytes]

    def receive(self, count: int) -> None:
        """Until it has printed `count` messages (late probes not counted)."""
        assert self.process.stdout is not None
        received = 0
        while received < count:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"mosquitto_sub stopped after {received} of {count} messages")
            received += line.rstrip(b"\n") != PROBE


@contextmanager
def subscriber(port: int, topic_filter: str, probe_topic: str, timeout: float = 120.0) -> Iterator[Subscriber]:
    """`mosquitto_sub -q 1` on `topic_filter`, subscribed (it printed a probe sent to `probe_topic`), stopped
    at the end; a run stalled past `timeout` ends in an error rather than a hang."""
    process = subprocess.Popen(
        [require_binary("mosquitto_sub"), *address(port, topic_filter)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    try:
        assert process.stdout is not None
        _until_subscribed(address(port, probe_topic), process.stdout.fileno())
        yield Subscriber(process.pid, process)
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()


def _until_subscribed(probe: list[str], fd: int, deadline: float = 10.0) -> None:
    """Publish the probe until the subscriber prints it; what it printed is read (and skipped) later."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        subprocess.run([require_binary("mosquitto_pub"), *probe, "-m", PROBE.decode()], check=True)
        if select.select([fd], [], [], 0.2)[0]:
            return
    raise RuntimeError(f"mosquitto_sub did not show a message in {deadline:.0f} s")
