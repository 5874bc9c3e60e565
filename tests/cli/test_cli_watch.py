"""`mam jobs --watch` / `mam watch`: driven by the broker, a line per change, Ctrl-C exits 0."""

from __future__ import annotations

import json
import re
import signal
import subprocess

import anyio
import pytest
from watch_support import Lines, _read_until, watching

from mam.agents import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.workspace import resolve

from brokers import RunningBroker
from e2e import event, projector_process, workspace_id
from support import child_env, mam, publish
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


async def test_watch_json_emits_a_line_per_new_job_and_status_change_and_ctrl_c_exits_0(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    url, root = amqtt.url, str(ws.root)
    where = ("--broker", url, "--workspace", root)
    topic = f"mam/{workspace_id(ws.root)}/jobs/job-new/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            await pub.submit(prompt="before", agent="a", job_id="job-old", wait=True)
            async with (
                watching(ws.elsewhere, "jobs", "--watch", "--json", *where) as everything,
                watching(ws.elsewhere, "watch", "--agent", "b", *where) as only_b,
            ):
                first = await everything.record(lambda r: True)
                assert (first["job_id"], first["status"]) == ("job-old", "submitted")

                await pub.submit(prompt="after", agent="a", job_id="job-new", wait=True)
                new = await everything.record(lambda r: r["job_id"] == "job-new")
                assert new["status"] == "submitted" and new["submitted_at"].endswith("Z"), "ISO 8601 UTC"
                for kind, fields, status in (
                    ("claimed", {"runner": "r"}, "claimed"),
                    ("started", {}, "running"),
                    ("succeeded", {"result": "ok"}, "succeeded"),
                ):
                    await publish(url, topic, event(kind, f"e-{kind}", **fields))
                    changed = await everything.record(lambda r: r["job_id"] == "job-new")
                    assert changed["status"] == status

                await pub.submit(prompt="for b", agent="b", job_id="job-b", wait=True)
                line = await only_b.next()
                assert line.split()[1:4] == ["job-b", "submitted", "b"], "piped: one plain line per change"
                assert only_b.seen == [line], "the filter kept every job-a line out"
                await everything.record(lambda r: r["job_id"] == "job-b")
                assert await everything.interrupt() == 0
                assert await only_b.interrupt() == 0
    assert [json.loads(line)["job_id"] for line in everything.seen] == ["job-old"] + ["job-new"] * 4 + ["job-b"]


async def test_watch_of_an_unreachable_broker_is_one_line_exit_3(ws: WorkspacePaths) -> None:
    from brokers import free_port
    from support import run

    result = await run(
        mam("watch", "--broker", f"mqtt://127.0.0.1:{free_port()}", "--workspace", str(ws.root)), cwd=ws.elsewhere
    )
    assert result.returncode == 3 and b"cannot reach the MQTT broker" in result.stderr
    assert result.stderr.count(b"\n") == 1, result.stderr


async def test_on_a_terminal_the_table_is_redrawn_in_place_coloured_unless_no_color(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    import os
    import pty

    where = ("--broker", amqtt.url, "--workspace", str(ws.root))
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(amqtt.url)) as pub:
            await pub.submit(prompt="p", agent="a", job_id="job-t1", wait=True)
            for no_color, coloured in ((None, True), ("1", False)):
                master, slave = pty.openpty()
                try:
                    proc = await anyio.open_process(
                        mam("watch", *where), cwd=ws.elsewhere, stdout=slave, env=child_env(NO_COLOR=no_color)
                    )
                    async with proc:
                        first = await _read_until(master, b"Ctrl-C to stop")
                        assert b"\x1b[H\x1b[2J" in first and b"job-t1" in first
                        assert (b"\x1b[2msubmitted\x1b[0m" in first) is coloured, first
                        topic = f"mam/{workspace_id(ws.root)}/jobs/job-t1/events"
                        await publish(amqtt.url, topic, event("claimed", f"c-{coloured}", runner="r"))
                        if not coloured:
                            await publish(amqtt.url, topic, event("started", "s1"))
                        redrawn = await _read_until(master, b"claimed" if coloured else b"running")
                        assert b"\x1b[H\x1b[2J" in redrawn, "the same screen, drawn again"
                        proc.send_signal(signal.SIGINT)
                        with anyio.fail_after(10):
                            assert await proc.wait() == 0
                finally:
                    os.close(master)
                    os.close(slave)


async def test_a_watch_outlives_a_mam_up_restart_and_shows_a_job_submitted_after_it(ws: WorkspacePaths) -> None:
    from brokers import free_port
    from e2e import up_process

    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    workspace = resolve(workspace=ws.root, env={})
    async with up_process(ws.root, ws.elsewhere, port):
        async with Publisher(workspace, parse_broker_url(url)) as pub:
            await pub.submit(prompt="before", agent="a", job_id="job-before", wait=True)
        proc = await anyio.open_process(
            mam("watch", "--broker", url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        watch = Lines(proc)
        await watch.next(lambda line: "job-before" in line)
    try:
        lost = await watch.next(lambda line: line.startswith("mam: lost the broker"))
        assert re.fullmatch(rf"mam: lost the broker at {re.escape(url)}: [a-z][a-z ()]+; reconnecting", lost), lost
        assert proc.returncode is None, "the watch keeps running while the broker is down"
        async with up_process(ws.root, ws.elsewhere, port):
            back = await watch.next(lambda line: line.startswith("mam: reconnected"))
            assert re.fullmatch(rf"mam: reconnected to {re.escape(url)} after [0-9.]+s", back), back
            async with Publisher(workspace, parse_broker_url(url)) as pub:
                await pub.submit(prompt="after", agent="a", job_id="job-after", wait=True)
            after = await watch.next(lambda line: "job-after" in line)
            assert after.split()[1:3] == ["job-after", "submitted"], after
            assert await watch.interrupt() == 0
        assert sum("job-before" in line for line in watch.seen) == 1, "its retained state, seen again, is no change"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.aclose()


async def test_piped_watch_lines_are_a_jobs_status_changes_with_their_times(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    import re

    where = ("--broker", amqtt.url, "--workspace", str(ws.root))
    topic = f"mam/{workspace_id(ws.root)}/jobs/job-ten/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(amqtt.url)) as pub:
            await pub.submit(prompt="ten lines", agent="a", job_id="job-ten", wait=True)
            async with (
                watching(ws.elsewhere, "watch", *where) as piped,
                watching(ws.elsewhere, "watch", "--json", *where) as records,
            ):
                await piped.next()
                await records.next()
                await publish(amqtt.url, topic, event("claimed", "e-claimed", runner="r"))
                # recorded before the next: two events folded in one batch publish one state (running)
                await records.record(lambda r: r["status"] == "claimed")
                await publish(amqtt.url, topic, event("started", "e-started"))
                for n in range(10):  # each chunk recorded before the next: a new version of the state each
                    await publish(amqtt.url, topic, event("output", f"e-out{n}", text=f"line {n}\n"))
                    await records.record(lambda r, n=n: r["output_bytes"] == 7 * (n + 1))
                await publish(amqtt.url, topic, event("succeeded", "e-done", result="ok"))
                await piped.next(lambda line: " succeeded " in line)
                assert await piped.interrupt() == 0
                assert await records.interrupt() == 0
    assert [line.split()[2] for line in piped.seen] == ["submitted", "claimed", "running", "succeeded"], piped.seen
    for line in piped.seen:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line.split()[0]), line
        assert line.split()[1] == "job-ten"
    running = [json.loads(line) for line in records.seen if json.loads(line)["status"] == "running"]
    assert len(running) >= 10, "--json still shows each new version (the output chunks')"
