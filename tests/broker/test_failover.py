"""Several brokers, one workspace: broker lists, failover across a NATS cluster, stale `online` statuses,
and many workspaces on one broker."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import aiomqtt
import anyio
import pytest
from nats_cluster import nats_cluster
from runner_support import TERMINAL, agent_runner, mock_command

from mam.agents.publisher import Publisher
from mam.client.failover import Rotation, subscribe_required
from mam.contract.broker_list import BrokerList, parse_broker_urls
from mam.contract.broker_url import parse_broker_url
from mam.contract.topics import Topics
from mam.contract.workspace import resolve

from brokers import RunningBroker
from e2e import assert_log_and_registry_consistent, job_streams, projector_process, workspace_id
from support import (
    BIN,
    DEAD_BROKER,
    Daemon,
    _client,
    child_env,
    mam,
    publish,
    run,
    wait_for_message,
    wait_projector_online,
)
from workspace_support import WorkspacePaths

RECOVERY = 30.0
"""Every event is recorded within this many seconds of killing the projector's node."""
QUIET = logging.getLogger("test_failover.publisher")
QUIET.setLevel(logging.ERROR)  # aiomqtt warns of every window of more than 10 publishes in flight


# --- broker lists -------------------------------------------------------------------------------


@pytest.mark.fast
def test_broker_lists_parse_repeated_and_comma_separated_and_keep_one_url_as_before() -> None:
    brokers = parse_broker_urls(["mqtt://a:1", "b:2,mqtts://c"])
    assert [b.url for b in brokers] == ["mqtt://a:1", "mqtt://b:2", "mqtts://c:8883"]
    assert brokers.url == "mqtt://a:1,mqtt://b:2,mqtts://c:8883"
    # A password with a comma in it stays one URL, as it was before lists.
    (single,) = parse_broker_urls("mqtt://u:p,w@h:1")
    assert (single.host, single.password) == ("h", "p,w")
    assert len(parse_broker_urls("mqtt://a:1,mqtt://a:1")) == 1


@pytest.mark.fast
def test_rotation_tries_the_brokers_after_the_lost_one_first() -> None:
    rotation = Rotation(BrokerList(tuple(parse_broker_url(u) for u in ("a:1", "b:2", "c:3"))))
    assert [a.port for a in rotation.order()] == [1, 2, 3]
    rotation.current = rotation.addresses[1]  # as `open` sets it on connecting to b
    rotation.lost()
    assert [a.port for a in rotation.order()] == [3, 1, 2]
    rotation.lost()  # a failed round: the same order again
    assert [a.port for a in rotation.order()] == [3, 1, 2]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (mam("jobs", "--watch", "--broker", "mqtt://127.0.0.1:9,http://x"), "'http://x'"),
        (mam("submit", "--prompt", "p", "--agent", "a", "--broker", "mqtt://127.0.0.1:9", "--broker", "b:x"), "'b:x'"),
        ([str(BIN / "mam-projector"), "--broker", "mqtt://127.0.0.1:9,,mqtt://127.0.0.1:10"], "'mqtt://127.0.0.1:9,,"),
    ],
)
async def test_a_malformed_url_in_a_broker_list_is_a_one_line_usage_error_naming_it(
    ws: WorkspacePaths, argv: list[str], named: str
) -> None:
    result = await run([*argv, "--workspace", str(ws.root)], cwd=ws.elsewhere)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and named in err, err
    assert not (ws.root / ".mam").exists()


async def test_bad_url_in_mam_broker_url_names_it(ws: WorkspacePaths) -> None:
    env = child_env(MAM_BROKER_URL="mqtt://127.0.0.1:9,ftp://nope")
    result = await run(
        mam("submit", "--prompt", "p", "--agent", "a", "--workspace", str(ws.root)), cwd=ws.elsewhere, env=env
    )
    assert result.returncode == 2 and "'ftp://nope'" in result.stderr.decode(), result.stderr


async def test_clients_connect_to_the_first_broker_that_answers(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    brokers = f"{DEAD_BROKER},{mosquitto.url}"
    projector = Daemon(
        [str(BIN / "mam-projector"), "--workspace", str(ws.root)],
        cwd=ws.elsewhere,
        env=child_env(MAM_BROKER_URL=brokers),
        log=ws.root.parent / "projector.log",
    )
    try:
        status = await wait_projector_online(mosquitto.url, workspace_id(ws.root), pid=projector.pid)
        assert status["broker"] == mosquitto.url  # the one it is connected to, not the list
        result = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "a",
                "--job-id",
                "job-listed",
                "--wait",
                "--workspace",
                str(ws.root),
                "--broker",
                DEAD_BROKER,
                "--broker",
                mosquitto.url,
            ),
            cwd=ws.elsewhere,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads((ws.jobs / "job-listed.json").read_bytes())["status"] == "submitted"
        # A runner given the list claims and runs jobs; a follower given the list sees it end.
        runner = Daemon(
            [
                str(BIN / "mam-agent"),
                "--agent",
                "mock",
                *mock_command(),
                "--workspace",
                str(ws.root),
                "--broker",
                brokers,
            ],
            cwd=ws.elsewhere,
            env=child_env(),
            log=ws.root.parent / "runner.log",
        )
        try:
            result = await run(
                mam("submit", "--prompt", "echo listed", "--agent", "mock", "--follow", "--workspace", str(ws.root)),
                cwd=ws.elsewhere,
                env=child_env(MAM_BROKER_URL=brokers),
                timeout=60,
            )
            assert result.returncode == 0, (result.stderr, runner.output())
            assert b"prompt=echo listed" in result.stdout
        finally:
            runner.stop()
    finally:
        projector.stop()


async def test_no_broker_of_a_list_answering_names_them_all(ws: WorkspacePaths) -> None:
    result = await run(
        mam(
            "submit",
            "--prompt",
            "p",
            "--agent",
            "a",
            "--workspace",
            str(ws.root),
            "--broker",
            "mqtt://127.0.0.1:9",
            "--broker",
            "mqtt://127.0.0.1:7",
        ),
        cwd=ws.elsewhere,
    )
    err = result.stderr.decode()
    assert result.returncode == 3, err
    assert "cannot reach any of the MQTT brokers mqtt://127.0.0.1:9,mqtt://127.0.0.1:7" in err, err


# --- stale statuses -----------------------------------------------------------------------------


def _left_behind_online(ws_id: str, seconds_ago: float, every: float = 1.0) -> bytes:
    """The retained `online` a projector leaves when its broker node dies with its will."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - seconds_ago))
    return json.dumps(
        {
            "status": "online",
            "workspace": ws_id,
            "pid": 999999,
            "host": "gone",
            "version": "0",
            "started_at": at,
            "registry_dir": "/nowhere",
            "logs_dir": "/nowhere",
            "broker": "mqtt://dead-node:1883",
            "heartbeat_at": at,
            "heartbeat_every": every,
        }
    ).encode()


async def test_submit_says_so_when_the_online_status_is_stale_and_publishes_nothing(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    await publish(mosquitto.url, topics.projector_status, _left_behind_online(ws_id, 60), retain=True)
    try:
        async with _client(mosquitto.url) as watcher:
            await watcher.subscribe(topics.all_events, qos=1)
            result = await run(
                mam(
                    "submit",
                    "--prompt",
                    "p",
                    "--agent",
                    "a",
                    "--wait",
                    "--broker",
                    mosquitto.url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            err = result.stderr.decode()
            assert result.returncode == 3, err
            assert re.search(
                r"last said it was online 6\ds ago \(heartbeat every 1s\) on mqtt://dead-node:1883", err
            ), err
            assert "nothing published" in err
            with anyio.move_on_after(0.5) as quiet:  # a publish would already be here
                await anext(aiter(watcher.messages))
            assert quiet.cancelled_caught, "a submit was published without a live projector"
        described = json.loads(
            (
                await run(
                    mam("workspace", "--json", "--broker", mosquitto.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
                )
            ).stdout
        )
        assert described["projector_status"]["stale"] is True
        assert described["projector_status"]["broker"] == "mqtt://dead-node:1883"
    finally:
        await publish(mosquitto.url, topics.projector_status, b"", retain=True)


async def test_a_live_projector_refreshes_its_status_and_is_not_stale(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--heartbeat", "2")) as projector:
        first = await wait_projector_online(mosquitto.url, ws_id, pid=projector.pid)
        _, later = await wait_for_message(
            mosquitto.url,
            Topics(ws_id).projector_status,
            lambda _t, p: json.loads(p).get("heartbeat_at", "") > first["heartbeat_at"],
            timeout=10,
        )
        assert json.loads(later)["status"] == "online" and json.loads(later)["heartbeat_every"] == 2
        result = await run(mam("workspace", "--broker", mosquitto.url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        line = next(x for x in result.stdout.decode().splitlines() if x.startswith("projector_status"))
        assert f"online on {mosquitto.url} (pid {projector.pid}" in line and "stale" not in line, line


# --- a three-node NATS cluster ------------------------------------------------------------------


async def _publish_all(urls: list[str], items: list[tuple[str, bytes]], topics: Topics, window: int = 100) -> None:
    """Publish every item at QoS 1, `window` in flight, through the first node of `urls` that takes
    them; after a lost connection, resend every item not acknowledged yet, through the next node
    (the same event ids: duplicates are the projector's to drop)."""
    pending = dict(enumerate(items))
    attempt = 0
    while pending:
        try:
            async with _client(
                urls[attempt % len(urls)], timeout=5, max_inflight_messages=window, logger=QUIET
            ) as client:
                async with anyio.create_task_group() as tg:
                    limiter = anyio.CapacityLimiter(window)
                    for i, (job_id, payload) in sorted(pending.items()):
                        tg.start_soon(_publish_one, client, limiter, topics.events(job_id), payload, pending, i)
        except* aiomqtt.MqttError:
            attempt += 1
            await anyio.sleep(0.2)  # reconnect backoff while the cluster elects new leaders


async def _publish_one(
    client: aiomqtt.Client,
    limiter: anyio.CapacityLimiter,
    topic: str,
    payload: bytes,
    pending: dict[int, tuple[str, bytes]],
    i: int,
) -> None:
    async with limiter:
        await client.publish(topic, payload, qos=1)
    del pending[i]


async def _until_all_recorded(registry: Path, versions: dict[str, int]) -> None:
    """Until every job's record reaches its version: what the projector wrote, read from its files."""
    while True:
        done = 0
        for job_id, version in versions.items():
            try:
                done += json.loads((registry / f"{job_id}.json").read_bytes())["version"] >= version
            except (FileNotFoundError, ValueError):
                pass
        if done == len(versions):
            return
        await anyio.sleep(0.1)  # polling files the projector writes


async def _status_moved(urls: list[str], topics: Topics, pid: int, dead: str) -> dict:
    """The projector's retained status once it names another node than `dead`, read through any live node."""
    attempt = 0
    while True:
        try:
            async with _client(urls[attempt % len(urls)], timeout=5) as client:
                await subscribe_required(client, topics.projector_status)  # a node mid-election refuses
                async for message in client.messages:
                    status = json.loads(message.payload) if isinstance(message.payload, bytes) else {}
                    if status.get("pid") == pid and status.get("broker") != dead:
                        return status
        except aiomqtt.MqttError:
            attempt += 1
            await anyio.sleep(0.2)  # reconnect backoff


@pytest.mark.unsigned_runners
@pytest.mark.slow
async def test_killing_the_projectors_nats_node_fails_over_without_losing_or_doubling_an_event(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    expected, payloads = job_streams(100, 20)  # 2,000 events with ids
    async with nats_cluster(tmp_path / "cluster") as cluster:
        home, other, third = cluster.nodes
        # Repeated and comma-separated: the projector takes the first node that answers.
        projector = Daemon(
            [
                str(BIN / "mam-projector"),
                "--broker",
                home.url,
                "--broker",
                f"{other.url},{third.url}",
                "--workspace",
                str(ws.root),
            ],
            cwd=ws.elsewhere,
            env=child_env(),
            log=tmp_path / "projector.log",
        )
        try:
            status = await wait_projector_online(other.url, ws_id, pid=projector.pid, timeout=30)
            assert status["broker"] == home.url
            half = len(payloads) // 2
            await _publish_all([other.url, third.url], payloads[:half], topics)
            await wait_for_message(other.url, topics.state(payloads[0][0]), timeout=20)  # it is recording
            home.kill9()
            killed_at = time.monotonic()
            with anyio.fail_after(RECOVERY):
                await _publish_all([other.url, third.url], payloads[half:], topics)
                published = time.monotonic() - killed_at
                await _until_all_recorded(ws.jobs, {job: 20 for job in expected})
            took = time.monotonic() - killed_at
            assert projector.proc.poll() is None, "the projector stopped instead of failing over"
            # Retained messages come back once their stream has a leader again (often after the events).
            with anyio.fail_after(RECOVERY):
                moved = await _status_moved([third.url, other.url], topics, projector.pid, home.url)
            assert moved["status"] == "online" and moved["broker"] in (other.url, third.url), moved
        finally:
            projector.stop()
        assert "lost the broker" in projector.output()
    assert_log_and_registry_consistent(ws, ws_id, expected)
    print(f"published the rest {published:.1f}s and recorded everything {took:.1f}s after the kill")


# --- many workspaces on one broker --------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.slow
async def test_twenty_workspaces_on_one_broker_each_record_only_their_own_jobs(
    mosquitto: RunningBroker, tmp_path: Path
) -> None:
    spaces = []
    for i in range(20):
        root, elsewhere = tmp_path / f"ws{i}", tmp_path / f"elsewhere{i}"
        root.mkdir()
        elsewhere.mkdir()
        spaces.append(WorkspacePaths(root=root, elsewhere=elsewhere))
    listed = parse_broker_urls([DEAD_BROKER, mosquitto.url])  # the submitters take the first that answers

    async def serve(space: WorkspacePaths, ready: anyio.Event) -> None:
        # 40 processes start at once: on a loaded 2-core machine the 20 s a single projector gets is short.
        async with projector_process(
            mosquitto, space.root, space.elsewhere, log_dir=space.elsewhere, online_within=120
        ):
            async with agent_runner(mosquitto.url, space, *mock_command(), name=f"r-{space.root.name}"):
                ready.set()
                await anyio.sleep_forever()

    jobs: dict[Path, list[str]] = {space.root: [f"job-{space.root.name}-{n}" for n in range(2)] for space in spaces}
    with anyio.fail_after(240):
        async with anyio.create_task_group() as servers:
            ready = [anyio.Event() for _ in spaces]
            for space, event in zip(spaces, ready, strict=True):
                servers.start_soon(serve, space, event)
            for event in ready:
                await event.wait()

            async def submit_all(space: WorkspacePaths) -> None:
                workspace = resolve(workspace=space.root, env={})
                async with Publisher(workspace, listed) as pub:
                    for job_id in jobs[space.root]:
                        await pub.submit(prompt=f"echo {job_id}", agent="mock", job_id=job_id, wait=True)
                    for job_id in jobs[space.root]:
                        record = await pub.wait_ended(job_id, timeout=60)
                        assert record.status.value == "succeeded", record

            async with anyio.create_task_group() as submits:  # every workspace at once
                for space in spaces:
                    submits.start_soon(submit_all, space)
            servers.cancel_scope.cancel()
    for space in spaces:
        ws_id = workspace_id(space.root)
        recorded = sorted(p.stem for p in space.jobs.glob("*.json"))
        assert recorded == sorted(jobs[space.root]), (space.root.name, recorded)
        for job_id in recorded:
            record = json.loads((space.jobs / f"{job_id}.json").read_bytes())
            assert record["workspace"] == ws_id and record["status"] in TERMINAL
        assert sorted(p.name for p in space.logs.iterdir() if p.is_dir()) == sorted(jobs[space.root])
