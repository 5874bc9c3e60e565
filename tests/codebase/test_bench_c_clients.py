"""bench/c_clients.py, the C broker's QoS 1 ceiling `throughput.py` reads the projector against: mosquitto's
own clients carry every payload over a real mosquitto (each topic's in order), a payload `mosquitto_pub -l`
would split is refused before anything is sent, and `throughput.py --feed c` keeps each job's order."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers import RunningBroker, require_binary
from support import CHECKOUT

sys.path.insert(0, str(CHECKOUT / "bench"))

import c_clients  # noqa: E402
from feeds import by_job  # noqa: E402


def test_the_c_clients_carry_every_payload_in_order(mosquitto: RunningBroker) -> None:
    streams = {f"bench/c/{n}": [b'{"n":%d,"i":%d}' % (n, i) for i in range(300)] for n in range(3)}
    got: list[bytes] = []
    with c_clients.subscriber(mosquitto.port, "bench/c/+", "bench/c/0", timeout=60) as sub:
        c_clients.publish(mosquitto.port, streams, window=20, timeout=60)
        assert sub.process.stdout is not None
        while len(got) < 900:
            line = sub.process.stdout.readline().rstrip(b"\n")
            assert line, f"mosquitto_sub stopped after {len(got)} messages"
            if line != c_clients.PROBE:
                got.append(line)
    for n, payloads in enumerate(streams.values()):
        assert [line for line in got if line.startswith(b'{"n":%d,' % n)] == payloads


@pytest.mark.fast
def test_a_payload_with_a_newline_is_refused_before_anything_is_sent() -> None:
    require_binary("mosquitto_pub")
    with pytest.raises(ValueError, match="holds a newline"):
        c_clients.publish(1, {"t": [b"ok", b"two\nlines"]}, window=1)


@pytest.mark.fast
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.binary(max_size=8)), max_size=40))
def test_feed_c_keeps_each_jobs_events_in_order(events: list[tuple[str, bytes]]) -> None:
    streams = by_job("ws", events)
    assert sum(len(v) for v in streams.values()) == len(events)
    for job in {j for j, _ in events}:
        assert streams[f"mam/ws/jobs/{job}/events"] == [p for j, p in events if j == job]


def test_throughput_refuses_an_unknown_feed_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, str(CHECKOUT / "bench" / "throughput.py"), "--feed", "rust"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--feed" in result.stderr and "Traceback" not in result.stderr
