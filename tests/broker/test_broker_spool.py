"""`mam-broker` keeps a workspace's events on disk until its projector acknowledges them.

Real processes throughout: `mam-broker` with `--spool`, `mam-projector`, publishers
that wait for each PUBACK. The broker is stopped cleanly and killed with SIGKILL.
(`kill -9` of the projector under load on mam-broker: test_delivery.py, with
mosquitto and NATS.)
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiomqtt
import pytest
from amqtt_support import first_message
from disk_full_support import fill

from mam.broker import retained_log
from mam.broker.spool import Spool, spooled_workspace
from mam.broker.spool_records import decode_records, encode_record
from mam.contract.errors import UsageError
from mam.registry.nofollow import PathRefused

from brokers import BROKERS, RunningBroker, _spawn, wait_for_port
from e2e import assert_log_and_registry_consistent, projector_process, submit, workspace_id
from support import publish, wait_for_state
from workspace_support import WorkspacePaths


@contextmanager
def own_broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with BROKERS["amqtt"](tmp_path / "own-broker") as broker:
        yield broker


def restart(broker: RunningBroker, how: str) -> None:
    """Stop `mam-broker` (SIGTERM, or SIGKILL) and start it again on the same port and spool."""
    if how == "kill9":
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait(10)
        broker.proc = _spawn(broker.restart_cmd, broker.log)
        wait_for_port(broker.port, broker.proc)
    else:
        broker.restart()


async def publish_all(url: str, port: int, ws_id: str, payloads: list[tuple[str, bytes]]) -> None:
    """Each publish waits for its PUBACK: acknowledged means the broker has it on disk."""
    async with aiomqtt.Client("127.0.0.1", port) as client:
        for job_id, payload in payloads:
            await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)


async def test_100_jobs_published_while_the_projector_is_down_are_all_recorded_once(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    expected = {f"down-{n}": [f"down-{n}-e0"] for n in range(100)}
    with own_broker(tmp_path) as broker:
        # No projector has ever connected: the spool keeps them all the same.
        await publish_all(broker.url, broker.port, ws_id, [(j, submit(j, ids[0])) for j, ids in expected.items()])
        async with projector_process(broker, ws.root, ws.elsewhere):
            for job_id in expected:
                await wait_for_state(broker.url, ws_id, job_id, timeout=30)
        # Back again: everything was acknowledged, nothing comes twice.
        async with projector_process(broker, ws.root, ws.elsewhere) as again:
            await wait_for_state(broker.url, ws_id, "down-99")
        assert ", 0 duplicates," in again.output(), again.output()
    assert_log_and_registry_consistent(ws, ws_id, expected)


@pytest.mark.parametrize("how", ["kill9", "stop"])
async def test_a_broker_restart_keeps_unacknowledged_events_and_retained_states(
    how: str, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    with own_broker(tmp_path) as broker:
        async with projector_process(broker, ws.root, ws.elsewhere):
            await publish(broker.url, f"mam/{ws_id}/jobs/before/events", submit("before", "b0"))
            recorded = await wait_for_state(broker.url, ws_id, "before")
        await publish(broker.url, "elsewhere/retained", b"kept", retain=True)
        await publish_all(
            broker.url, broker.port, ws_id, [(f"away-{n}", submit(f"away-{n}", f"a{n}")) for n in range(20)]
        )
        restart(broker, how)
        # The projector's state and an unrelated retained message, as they were.
        assert await first_message(broker.url, "elsewhere/retained") == b"kept"
        kept = await wait_for_state(broker.url, ws_id, "before", timeout=5)
        assert kept == recorded
        async with projector_process(broker, ws.root, ws.elsewhere):
            for n in range(20):
                await wait_for_state(broker.url, ws_id, f"away-{n}", timeout=30)
    expected = {"before": ["b0"], **{f"away-{n}": [f"a{n}"] for n in range(20)}}
    assert_log_and_registry_consistent(ws, ws_id, expected)


@pytest.mark.fast
def test_a_torn_or_corrupt_tail_of_a_spool_file_is_ignored_and_the_intact_records_kept() -> None:
    data = encode_record(1, "mam/w/jobs/a/events", b"one") + encode_record(2, "mam/w/jobs/b/events", b"two")
    records, intact = decode_records(data + data[:10])
    assert [seq for seq, _, _ in records] == [1, 2] and intact == len(data)
    records, intact = decode_records(data[:-1] + b"X")
    assert records == [(1, "mam/w/jobs/a/events", b"one")]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("topic", "workspace"),
    [
        ("mam/w1/jobs/j/events", "w1"),
        ("mam/w1/jobs/j", "w1"),
        ("mam/w1/jobs/j/events/x", "w1"),
        ("mam/w1/jobs/j/state", None),
        ("mam/w1/agents/a/status", None),
        ("mam/w1/projector/status", None),
        ("other/w1/jobs/j/events", None),
        ("mam/../jobs/j/events", None),
    ],
)
def test_the_spool_keeps_exactly_what_a_projector_subscribes_to(topic: str, workspace: str | None) -> None:
    assert spooled_workspace(topic) == workspace


@pytest.mark.fast
def test_the_spool_dir_is_never_opened_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "spool").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PathRefused):
        Spool(tmp_path / "spool").open()
    assert not list((tmp_path / "elsewhere").iterdir())


@pytest.mark.fast
def test_two_brokers_cannot_share_a_spool(tmp_path: Path) -> None:
    first = Spool(tmp_path / "spool")
    first.open()
    try:
        with pytest.raises(UsageError, match="in use by another mam-broker"):
            Spool(tmp_path / "spool").open()
    finally:
        first.close()


async def _settled(spool: Spool) -> None:
    """Until the retained log has written what it was given and its fsyncs and compactions are done."""
    log = spool.retained_log
    assert log is not None
    for _ in range(1000):
        await asyncio.sleep(0)  # a loop turn: the pending write runs
        if not log._pending and not log._background:  # noqa: SLF001
            return
        if log._background:  # noqa: SLF001
            await asyncio.wait(set(log._background), timeout=10)  # noqa: SLF001
    raise AssertionError("the retained log did not settle")


async def test_the_retained_log_is_compacted_while_the_broker_runs_and_keeps_the_latest_of_each_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retained_log, "COMPACT_BYTES", 4096)
    spool = Spool(tmp_path / "spool")
    spool.open()
    try:
        for version in range(2000):
            spool.retain(f"mam/w/jobs/j{version % 3}/state", b"x" * 100 + str(version).encode(), 1)
            spool.retain("mam/w/jobs/gone/state", b"soon cleared", 1)
            spool.retain("mam/w/jobs/gone/state", b"", 0)
            if version % 50 == 0:
                await _settled(spool)
        await _settled(spool)
        size = (tmp_path / "spool" / "retained.log").stat().st_size
        assert size < 4 * 4096, f"retained.log is {size} bytes: never compacted"
    finally:
        spool.close()
    again = Spool(tmp_path / "spool")
    again.open()
    try:
        assert again.retained == {
            f"mam/w/jobs/j{n}/state": (b"x" * 100 + str(v).encode(), 1) for n, v in ((0, 1998), (1, 1999), (2, 1997))
        }
    finally:
        again.close()


async def test_a_write_the_full_disk_cut_short_is_repaired_and_every_retained_message_comes_back(
    small_disk: Path,
) -> None:
    spool = Spool(small_disk / "spool")
    spool.open()
    latest: dict[str, bytes] = {}
    try:
        for n in range(20):
            spool.retain(f"mam/w/jobs/j{n}/state", b"before %d" % n, 1)
            latest[f"mam/w/jobs/j{n}/state"] = b"before %d" % n
        await _settled(spool)
        fill(small_disk / "filler")
        for n in range(20):  # these writes fail, some of them half done
            spool.retain(f"mam/w/jobs/j{n}/state", b"during %d " % n + b"x" * 2000, 1)
            latest[f"mam/w/jobs/j{n}/state"] = b"during %d " % n + b"x" * 2000
            await _settled(spool)
        (small_disk / "filler").unlink()
        spool.retain("mam/w/jobs/after/state", b"after", 1)
        latest["mam/w/jobs/after/state"] = b"after"
        await _settled(spool)
    finally:
        spool.close()
    again = Spool(small_disk / "spool")
    again.open()
    try:
        assert {topic: payload for topic, (payload, _) in again.retained.items()} == latest
    finally:
        again.close()
