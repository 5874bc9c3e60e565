"""Only the projector writes state, and per-user ACLs in mosquitto's own format, on mam's broker.

A forged retained state, refusal or projector status (published directly, or as
a will) is acknowledged by the broker (MQTT 3.1.1 has no negative PUBACK) but
dropped: a fresh subscriber gets the projector's record. Both under `mam up`
and `mam-broker`, anonymous and as an authenticated user; docs/mosquitto.acl
is run on mam-broker with the assertions tests/broker/test_access.py runs on mosquitto.
"""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from access_support import DOCS, assert_acl_reserves_projector_topics_and_confines_workspaces
from hypothesis import given
from hypothesis import strategies as st
from keepalive_support import connect_packet

from mam.broker.acl import Policy, parse_acl, projector_topic, within
from mam.broker.passwords import set_password
from mam.contract.errors import UsageError

from brokers import RunningBroker, free_port, stop, wait_for_port
from e2e import up_with_flags as up
from e2e import workspace_id
from support import BIN, Daemon, Watch, _client, child_env, publish, wait_for_state, wait_projector_online
from workspace_support import WorkspacePaths

SUBMIT = b'{"type":"submitted","prompt":"p","agent":"a"}'


# --- the pure parts --------------------------------------------------------------------------


@pytest.mark.fast
def test_the_acl_file_reads_users_topics_patterns_and_comments() -> None:
    acl = parse_acl(
        "# comment\ntopic read public/#\n\nuser alice\ntopic write a/+/x\ntopic b/#\n"
        "  topic deny b/secret\npattern readwrite own/%u/%c\n"
    )
    assert [r.pattern for r in acl.anonymous] == ["public/#"]
    alice = acl.rules("alice", "c1")
    assert [(sorted(r.access), r.pattern) for r in alice] == [
        (["write"], "a/+/x"),
        (["read", "write"], "b/#"),
        ([], "b/secret"),
        (["read", "write"], "own/alice/c1"),
    ]
    assert [r.pattern for r in acl.rules(None, "c2")] == ["public/#"], "a %u pattern skips anonymous clients"


@pytest.mark.fast
def test_a_deny_line_wins_over_a_wider_grant() -> None:
    policy = Policy(acl=parse_acl("topic readwrite #\ntopic deny test/nosubscribe\n"))
    assert policy.may("read", None, "c", "TopicA/B") and policy.may("write", None, "c", "test/other")
    assert not policy.may("read", None, "c", "test/nosubscribe")
    assert not policy.may("write", None, "c", "test/nosubscribe")


@pytest.mark.fast
@pytest.mark.parametrize("line", ["topic", "user", "topic read a/#/b", "publish a/b", "topic write a+/b"])
def test_a_malformed_acl_line_is_refused_with_its_line_number(line: str) -> None:
    with pytest.raises(UsageError, match=r"acl file:2:"):
        parse_acl(f"user u\n{line}\n")


@pytest.mark.fast
@pytest.mark.parametrize(
    ("requested", "allowed", "expected"),
    [
        ("mam/ws1/jobs/j/events", "mam/ws1/jobs/+/events", True),
        ("mam/ws1/jobs/+/state", "mam/ws1/jobs/+/state", True),
        ("mam/ws1/#", "mam/ws1/#", True),
        ("mam/ws1/jobs/+/state", "mam/ws1/#", True),
        ("mam/#", "mam/ws1/#", False),
        ("#", "mam/ws1/#", False),
        ("mam/+/jobs/j/state", "mam/ws1/jobs/+/state", False),
        ("mam/ws1", "mam/ws1/#", True),
        ("mam/ws1/jobs/j/state/x", "mam/ws1/jobs/+/state", False),
        ("$SYS/x", "#", False),
        ("$SYS/x", "$SYS/#", True),
    ],
)
def test_a_request_is_allowed_only_within_a_granted_filter(requested: str, allowed: str, expected: bool) -> None:
    assert within(requested, allowed) is expected


LEVEL = st.sampled_from(["mam", "ws1", "ws2", "jobs", "j", "state", "events", "+"])


@pytest.mark.fast
@given(st.lists(LEVEL, min_size=1, max_size=6), st.lists(st.sampled_from(["mam", "ws1", "jobs", "+", "#"]), max_size=5))
def test_within_agrees_with_topic_matching_for_names(levels: list[str], allowed: list[str]) -> None:
    """For a topic name, `within` is MQTT matching: checked against amqtt's own matcher."""
    from amqtt.plugins.topic_checking import TopicAccessControlListPlugin

    name = "/".join(level for level in levels if level != "+") or "x"
    a_filter = "/".join(allowed) or "#"
    if "#" in allowed[:-1]:
        return
    matches = TopicAccessControlListPlugin.topic_ac
    # MQTT-4.7.1-2: `a/#` also matches `a`, which amqtt's ACL helper leaves out.
    expected = matches(name, a_filter) or (a_filter.endswith("/#") and matches(name, a_filter[:-2]))
    assert within(name, a_filter) is expected


@pytest.mark.fast
def test_projector_topics_are_state_rejected_projector_status_and_offers() -> None:
    assert projector_topic("mam/ws1/jobs/j/state") == "ws1"
    assert projector_topic("mam/ws1/rejected") == "ws1"
    assert projector_topic("mam/ws1/projector/status") == "ws1"
    assert projector_topic("mam/ws1/agents/r/offers") == "ws1"
    for other in (
        "mam/ws1/jobs/j/events",
        "mam/ws1/agents/r/status",
        "other/ws1/rejected",
        "mam/ws1/jobs/j/state/x",
        "mam/ws1/agents/r/offers/x",
        "mam/ws1/jobs/j/offers",
    ):
        assert projector_topic(other) is None


@pytest.mark.fast
def test_the_default_policies() -> None:
    anonymous = Policy()
    assert anonymous.may("write", None, "any", "TopicA/B") and anonymous.may("read", None, "any", "#")
    assert not anonymous.may("write", None, "any", "mam/ws1/jobs/j/state")
    assert anonymous.may("write", None, "mam-projector-ws1", "mam/ws1/jobs/j/state")
    assert not anonymous.may("write", None, "mam-projector-ws2", "mam/ws1/rejected")
    assert not anonymous.may("write", None, "any", "mam/ws1/agents/r/offers")
    assert anonymous.may("write", None, "mam-projector-ws1", "mam/ws1/agents/r/offers")
    assert anonymous.may("read", None, "any", "mam/ws1/agents/r/offers")

    up = Policy(login=True, workspace="ws1", projector_client="secret")
    assert up.may("write", "u", "c", "mam/ws1/jobs/j/events") and up.may("write", "u", "c", "mam/ws1/agents/r/status")
    assert not up.may("write", "u", "c", "mam/ws2/jobs/j/events")
    assert not up.may("write", "projector-ws1", "mam-projector-ws1", "mam/ws1/jobs/j/state")
    assert up.may("write", "u", "secret", "mam/ws1/jobs/j/state")
    assert not up.may("write", "u", "c", "mam/ws1/agents/r/offers") and up.may(
        "write", "u", "secret", "mam/ws1/agents/r/offers"
    )
    assert up.may("read", "u", "c", "mam/ws1/#") and not up.may("read", "u", "c", "mam/#")

    shared = Policy(login=True)
    assert shared.may("write", "u", "c", "mam/ws2/jobs/j/events") and shared.may("read", "u", "c", "mam/#")
    assert not shared.may("write", "u", "mam-projector-ws1", "mam/ws1/jobs/j/state")
    assert shared.may("write", "projector-ws1", "c", "mam/ws1/jobs/j/state")
    assert not shared.may("write", "projector-ws1", "c", "mam/ws2/jobs/j/state")
    assert shared.may("write", "projector-ws1", "c", "mam/ws1/agents/r/offers")
    assert not shared.may("write", "u", "c", "mam/ws1/agents/r/offers")
    assert not shared.may("write", "projector-+", "c", "mam/ws2/jobs/j/state")
    assert not shared.may("write", "u", "c", "TopicA") and not shared.may("read", "u", "c", "#")


# --- the brokers -----------------------------------------------------------------------------


def users(tmp: Path, *names: str) -> Path:
    path = tmp / "passwd"
    for name in names:
        set_password(path, name, "pw")
    return path


@asynccontextmanager
async def mam_broker(tmp: Path, *args: str) -> AsyncIterator[RunningBroker]:
    port = free_port()
    cmd = [str(BIN / "mam-broker"), "--port", str(port), "--spool", str(tmp / "spool"), *args]
    with open(tmp / "mam-broker.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield RunningBroker("amqtt", port, proc, cmd, tmp / "mam-broker.log")
    finally:
        stop(proc)


@asynccontextmanager
async def projector(url: str, ws: WorkspacePaths, ws_id: str) -> AsyncIterator[Daemon]:
    cmd = [str(BIN / "mam-projector"), "--broker", url, "--workspace", str(ws.root), "--workspace-id", ws_id]
    daemon = Daemon(cmd, cwd=ws.elsewhere, env=child_env(), log=ws.root.parent / "projector.log")
    try:
        await wait_projector_online(url, ws_id, pid=daemon.pid)
        yield daemon
    finally:
        daemon.stop()


def mosquitto_pub(port: int, topic: str, payload: bytes, *, login: tuple[str, str] | None = None) -> None:
    cmd = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-r", "-t", topic, "-m", payload.decode()]
    if login is not None:
        cmd += ["-u", login[0], "-P", login[1]]
    subprocess.run(cmd, check=True, timeout=10, capture_output=True)


def will_forgery(port: int, topic: str, payload: bytes, login: tuple[str, str] | None) -> None:
    """A client whose retained will is a forgery, gone without DISCONNECT: the will must not be published."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(connect_packet(f"will-{uuid.uuid4().hex[:6]}", will=(topic, payload, True), login=login))
        assert sock.recv(4)[:1] == b"\x20"


async def forge(port: int, ws_id: str, job: str, login: tuple[str, str] | None = None) -> None:
    """Every forgery at once: retained state, refusal and projector status from aiomqtt and
    mosquitto_pub, a will on a state, and a state-looking payload on the events topic."""
    url = f"mqtt://{login[0]}:{login[1]}@127.0.0.1:{port}" if login else f"mqtt://127.0.0.1:{port}"
    forged = json.dumps({"job_id": job, "status": "succeeded", "forged": True}).encode()
    targets = {
        f"mam/{ws_id}/jobs/{job}/state": forged,
        f"mam/{ws_id}/rejected": b'{"forged": true}',
        f"mam/{ws_id}/projector/status": b'{"status": "online", "forged": true}',
    }
    for topic, payload in targets.items():
        await publish(url, topic, payload, retain=True)
        await anyio.to_thread.run_sync(lambda t=topic, p=payload: mosquitto_pub(port, t, p, login=login))
    will_forgery(port, f"mam/{ws_id}/jobs/{job}/state", forged, login)
    await publish(url, f"mam/{ws_id}/jobs/{job}/events", forged)  # not an event: refused by the projector


async def assert_only_the_projectors(url: str, ws: WorkspacePaths, ws_id: str, job: str) -> None:
    """A fresh subscriber gets the projector's record and status, no forged refusal."""
    await publish(url, f"mam/{ws_id}/jobs/{job}-after/events", SUBMIT)
    await wait_for_state(url, ws_id, f"{job}-after")  # every forgery before it has been handled
    state = await wait_for_state(url, ws_id, job)
    assert state["status"] == "submitted" and "forged" not in state, state
    assert state["status"] == json.loads((ws.jobs / f"{job}.json").read_bytes())["status"]
    status = await wait_projector_online(url, ws_id)
    assert "forged" not in status
    async with _client(url) as client:
        await client.subscribe(f"mam/{ws_id}/rejected", qos=1)
        with anyio.move_on_after(1):
            async for message in client.messages:
                assert b"forged" not in bytes(message.payload), message.payload  # type: ignore[arg-type]


async def test_mam_up_keeps_the_projector_topics_to_its_projector(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up(ws) as (port, daemon):
        url = f"mqtt://127.0.0.1:{port}"
        await publish(url, f"mam/{ws_id}/jobs/job-1/events", SUBMIT)
        await wait_for_state(url, ws_id, "job-1")
        await forge(port, ws_id, "job-1")
        await assert_only_the_projectors(url, ws, ws_id, "job-1")
    assert "refused client" in daemon.output()


async def test_mam_up_with_a_password_file_confines_users_to_its_workspace(ws: WorkspacePaths, tmp_path: Path) -> None:
    ws_id = workspace_id(ws.root)
    passwd = users(tmp_path, "agent", "projector-" + ws_id)
    async with up(ws, "--password-file", str(passwd), login="agent:pw") as (port, _):
        url = f"mqtt://agent:pw@127.0.0.1:{port}"
        await publish(url, f"mam/{ws_id}/jobs/job-1/events", SUBMIT)
        await wait_for_state(url, ws_id, "job-1")
        for user in ("agent", "projector-" + ws_id):
            await forge(port, ws_id, "job-1", login=(user, "pw"))
        await publish(url, "mam/elsewhere/jobs/job-x/events", SUBMIT)  # another workspace: dropped
        await assert_only_the_projectors(url, ws, ws_id, "job-1")
        async with _client(url) as client:
            granted = await client.subscribe([("mam/#", 1), (f"mam/{ws_id}/#", 1), ("TopicA", 1)])
        assert [getattr(code, "value", code) for code in granted] == [0x80, 1, 0x80], granted


async def test_mam_broker_anonymous_lets_only_the_projector_client_id_write_its_topics(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    async with mam_broker(tmp_path) as broker, projector(broker.url, ws, "ws1"):
        await publish(broker.url, "mam/ws1/jobs/job-1/events", SUBMIT)
        await wait_for_state(broker.url, "ws1", "job-1")
        await forge(broker.port, "ws1", "job-1")
        await assert_only_the_projectors(broker.url, ws, "ws1", "job-1")
    assert "refused client" in broker.log.read_text()  # type: ignore[union-attr]


async def test_mam_broker_with_a_password_file_reserves_each_workspaces_projector_user(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    passwd = users(tmp_path, "agent", "projector-ws1", "projector-ws2")
    async with mam_broker(tmp_path, "--password-file", str(passwd)) as broker:
        projector_url = f"mqtt://projector-ws1:pw@127.0.0.1:{broker.port}"
        agent = f"mqtt://agent:pw@127.0.0.1:{broker.port}"
        async with projector(projector_url, ws, "ws1"):
            await publish(agent, "mam/ws1/jobs/job-1/events", SUBMIT)
            await wait_for_state(agent, "ws1", "job-1")
            for user in ("agent", "projector-ws2"):
                await forge(broker.port, "ws1", "job-1", login=(user, "pw"))
            await assert_only_the_projectors(agent, ws, "ws1", "job-1")
            async with _client(agent) as client:
                granted = await client.subscribe([("#", 1), ("mam/#", 1), ("TopicA", 1)])
            assert [getattr(code, "value", code) for code in granted] == [0x80, 1, 0x80], granted


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_the_documented_acl_file_works_on_mam_broker(ws: WorkspacePaths, tmp_path: Path) -> None:
    """docs/mosquitto.acl, the same file and assertions tests/broker/test_access.py runs on mosquitto."""
    passwd = users(tmp_path, "projector-ws1", "agent-ws1", "agent-ws2")
    acl = DOCS / "mosquitto.acl"
    async with mam_broker(tmp_path, "--password-file", str(passwd), "--acl-file", str(acl)) as broker:
        await assert_acl_reserves_projector_topics_and_confines_workspaces(broker, ws)
        agent = f"mqtt://agent-ws1:pw@127.0.0.1:{broker.port}"
        async with _client(agent) as client:
            granted = await client.subscribe(
                [("mam/ws2/#", 1), ("mam/ws1/jobs/+/state", 1), ("mam/ws1/jobs/+/events", 1), ("mam/#", 1)]
            )
        assert [getattr(code, "value", code) for code in granted] == [0x80, 1, 0x80, 0x80], granted
        async with Watch(agent, "mam/ws1/agents/+/status") as watch:
            await publish(f"mqtt://agent-ws2:pw@127.0.0.1:{broker.port}", "mam/ws1/agents/r/status", b"forged")
            await publish(agent, "mam/ws1/agents/r/status", b"own")
            _, payload = await watch.next()
        assert payload == b"own", "a cross-workspace publish is dropped"
        async with projector(f"mqtt://projector-ws1:pw@127.0.0.1:{broker.port}", ws, "ws1"):
            await forge(broker.port, "ws1", "job-1", login=("agent-ws1", "pw"))
            await assert_only_the_projectors(agent, ws, "ws1", "job-1")


async def test_mam_up_takes_the_acl_file_too(ws: WorkspacePaths, tmp_path: Path) -> None:
    ws_id = workspace_id(ws.root)
    acl = tmp_path / "acl"
    acl.write_text(
        f"user agent\ntopic write mam/{ws_id}/jobs/+/events\ntopic read mam/{ws_id}/#\n"
        f"user watcher\ntopic read mam/{ws_id}/jobs/+/state\ntopic read mam/{ws_id}/projector/status\n"
        f"# even a grant cannot open the projector's topics under mam up\n"
        f"user forger\ntopic readwrite mam/#\n"
    )
    passwd = users(tmp_path, "agent", "watcher", "forger")
    async with up(ws, "--password-file", str(passwd), "--acl-file", str(acl), login="agent:pw") as (port, _):
        watcher = f"mqtt://watcher:pw@127.0.0.1:{port}"
        await publish(f"mqtt://agent:pw@127.0.0.1:{port}", f"mam/{ws_id}/jobs/job-1/events", SUBMIT)
        await wait_for_state(watcher, ws_id, "job-1")
        await publish(watcher, f"mam/{ws_id}/jobs/job-w/events", SUBMIT)  # watcher may not write: dropped
        await forge(port, ws_id, "job-1", login=("forger", "pw"))
        await assert_only_the_projectors(f"mqtt://agent:pw@127.0.0.1:{port}", ws, ws_id, "job-1")
        assert not (ws.jobs / "job-w.json").exists()
