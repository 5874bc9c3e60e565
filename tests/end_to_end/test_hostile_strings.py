"""Client-chosen strings reach no log with a control character or bidi override unescaped.

Topics, client ids, user names and the payload fields a refusal's reason quotes are whatever a client
sends. They are generated here (hypothesis): C0 and C1 controls, DEL, the bidi controls and the line
separators, mixed with other text, and one that forges a `mam:` line and clears the screen. They go over
real sockets to `mam up` (its broker and projector log in one process) and to `mam-projector` on
mosquitto; each process's log holds none of them raw, and each escaped on one line
(`mam.process.running.LogFormatter`, `mam.contract.terminal.safe`). Before it, `mam up` wrote a topic's
newline and ESC raw: any client could forge a `mam:` line and drive the operator's terminal.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import struct
import sys

import anyio
from hostile_strings_support import FORGED, generated, hostile, raw_in
from hypothesis import given, settings
from hypothesis import strategies as st
from raw_mqtt import publish_packet, remaining_length, up_process

from mam.contract.terminal import safe
from mam.process.running import LogFormatter

from brokers import RunningBroker
from e2e import projector_process, up_with_flags, workspace_id
from support import publish
from workspace_support import WorkspacePaths


@settings(max_examples=300)
@given(text=hostile(), keep=st.booleans())
def test_safe_leaves_no_hidden_character_and_can_be_read_back(text: str, keep: bool) -> None:
    shown = safe(text, keep_layout=keep)
    assert raw_in(shown) <= ({"\t"} if keep else set()) and ("\n" not in shown or keep)
    if "\\" not in text:  # each escape is `\xNN` or `\uNNNN`: the text reads back whole
        assert re.sub(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})", lambda m: chr(int(m[1] or m[2], 16)), shown) == text


@settings(max_examples=200)
@given(message=hostile(), argument=hostile(), raised=hostile())
def test_every_log_line_is_one_line_with_its_traceback_indented_under_it(
    message: str, argument: str, raised: str
) -> None:
    formatter = LogFormatter("mam: %(message)s")
    record = logging.LogRecord("mam.projector", logging.WARNING, __file__, 1, "%s %s", (message, argument), None)
    assert formatter.format(record) == "mam: " + safe(f"{message} {argument}", keep_layout=False)
    try:
        raise ValueError(raised)
    except ValueError:
        failed = logging.LogRecord("mam.projector", logging.ERROR, __file__, 1, "%s", (argument,), sys.exc_info())
    lines = formatter.format(failed).split("\n")
    assert lines[0] == "mam: " + safe(argument, keep_layout=False)
    assert lines[1] == "  Traceback (most recent call last):" and all(line.startswith("  ") for line in lines[1:])
    assert not any(raw_in(line) - {"\t"} for line in lines)  # the exception's text too: no line of its own
    plain = logging.Formatter().formatException(failed.exc_info).rstrip("\n")  # (an exception's text may end in one)
    assert "\n".join(line[2:] for line in lines[1:]) == safe(plain)


# -- over real sockets ------------------------------------------------------------------------------


def _connect_packet(client_id: str, user: str | None = None, password: str = "") -> bytes:
    def field(text: str) -> bytes:
        data = text.encode()
        return struct.pack("!H", len(data)) + data

    flags = 0x02 | (0xC0 if user is not None else 0)
    body = b"\x00\x04MQTT\x04" + bytes([flags]) + struct.pack("!H", 0) + field(client_id)
    if user is not None:
        body += field(user) + field(password)
    return b"\x10" + remaining_length(len(body)) + body


def _session(port: int, client_id: str, acknowledged: list[tuple[str, bytes]], refused: str | None = None) -> None:
    """A raw client `client_id`: publishes `acknowledged` at QoS 1 and reads their PUBACKs, then publishes on
    `refused` (a topic the ACL keeps to the projector: logged, never acknowledged), then disconnects."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_connect_packet(client_id))
        assert sock.recv(4) == b"\x20\x02\x00\x00", client_id
        for n, (topic, payload) in enumerate(acknowledged, start=1):
            sock.sendall(publish_packet(topic, payload, packet_id=n))
        received = b""
        while len(received) < 4 * len(acknowledged):
            data = sock.recv(4096)
            assert data, f"closed after {received!r}"
            received += data
        if refused is not None:
            sock.sendall(publish_packet(refused, b"{}", qos=0))
        sock.sendall(b"\xe0\x00")


def _assert_escaped(output: str, expected: list[str]) -> None:
    assert raw_in(output) == set(), [line for line in output.split("\n") if raw_in(line)][:5]
    assert not any(line.startswith("mam: forged") for line in output.split("\n")), "a client forged a line"
    missing = [line for line in expected if line not in output]
    assert missing == [], (missing[:3], output[-3000:])


async def test_mam_up_logs_the_topics_client_ids_and_quoted_fields_clients_chose_escaped(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    texts = [FORGED, *generated(42, 14, hostile())]
    expected = []
    async with up_process(ws) as (up, port):
        for n, text in enumerate(texts):
            client_id = f"h{n}-{text}"
            on_topic = f"mam/{ws_id}/jobs/{text}/events"  # not a job id: refused, topic named
            in_payload = f"mam/{ws_id}/jobs/h{n}/events"  # refused, the reason quoting the type
            state = f"mam/{ws_id}/jobs/{text}/state"  # the projector's: the ACL refuses the client
            await anyio.to_thread.run_sync(
                _session,
                port,
                client_id,
                [
                    (on_topic, b'{"type":"submitted","prompt":"p","agent":"a"}'),
                    (in_payload, json.dumps({"type": text}).encode()),
                ],
                state,
            )
            expected += [
                f"refused event on {on_topic}: ",
                f"refused event on {in_payload}: ",
                f"Invalid value '{text}'",
                f"refused client {client_id}: publish on {state}",
            ]
        await up.wait_for_output(safe(f"refused client h{len(texts) - 1}-{texts[-1]}", keep_layout=False), 30)
    _assert_escaped(up.output(), [safe(line, keep_layout=False) for line in expected])


async def test_mam_up_logs_a_refused_login_with_the_user_name_escaped(ws: WorkspacePaths) -> None:
    """A job login (`job:<id>`) refused: the broker logs its user name (once a minute: `broker/notices.py`)."""
    passwd = ws.root.parent / "passwd"
    from mam.broker.passwords import set_password

    set_password(passwd, "agent", "pw")
    user = "job:" + "".join([FORGED, *generated(7, 4, hostile())])
    async with up_with_flags(ws, "--password-file", str(passwd), login="agent:pw") as (port, up):

        def refused_login() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(_connect_packet("h-login", user, "nope"))
                return sock.recv(4)

        assert (await anyio.to_thread.run_sync(refused_login))[:2] == b"\x20\x02"
        await up.wait_for_output("refused the login of", 30)
    _assert_escaped(up.output(), [f"refused the login of {safe(user, keep_layout=False)} from "])


async def test_mam_projector_on_mosquitto_logs_topics_and_quoted_fields_escaped(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """mosquitto refuses C0 and C1 controls in a topic (mosquitto_validate_utf8); bidi controls it passes, and
    a payload may hold anything."""
    ws_id = workspace_id(ws.root)
    texts = [FORGED, *generated(43, 10, hostile())]
    topics = [f"\u202e{n}" for n in range(2)] + generated(
        44, 6, hostile(exclude="".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)])))
    )
    expected = []
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        for n, text in enumerate(texts):
            await publish(mosquitto.url, f"mam/{ws_id}/jobs/m{n}/events", json.dumps({"type": text}).encode())
            expected.append(f"Invalid value '{text}'")
        for text in topics:
            topic = f"mam/{ws_id}/jobs/{text}/events"
            await publish(mosquitto.url, topic, b'{"type":"submitted","prompt":"p","agent":"a"}')
            expected.append(f"refused event on {topic}")
        await projector.wait_for_output(safe(expected[-1], keep_layout=False), 30)
    _assert_escaped(projector.output(), [safe(line, keep_layout=False) for line in expected])
