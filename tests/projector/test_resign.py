"""A new signing key: the finished jobs' states are signed again in the background, while the projector records.

Real mosquitto, real `mam-projector` processes on a workspace of a few thousand finished jobs (audit logs
written directly, then `mam rebuild`, as bench/history.py builds one). What is checked is order and
outcome, never time: a job submitted at start is recorded before the re-sign has sent every finished
job's state; in the end every finished job's retained state verifies with the new key; a projector
killed midway finishes the re-sign at its next start (`projector/resign.py`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import anyio

from mam.client.inbox import messages
from mam.client.mqtt import make_client
from mam.contract import events as ev
from mam.contract.broker_url import parse_broker_url
from mam.contract.signing import StateReader, fingerprint, key_path, load_workspace_key, public_key_path
from mam.contract.topics import Topics
from mam.contract.workspace import resolve
from mam.projector.audit_log import EVENTS_FILE, LogEntry, encode_entry
from mam.projector.resign import CHUNK, MARKER

from brokers import RunningBroker
from e2e import projector_process, up_with_flags, workspace_id
from support import Daemon, mam, publish
from workspace_support import WorkspacePaths

SIGNED_AGAIN = "signed the retained states of"
"""The projector's log line once the re-sign is done."""


def finished_jobs(ws: WorkspacePaths, count: int) -> list[str]:
    """`count` finished jobs, each finished after the one before (the start-up republishes the newest
    1,000; the re-sign goes in job id order, oldest first), written the fast way; their ids."""
    ids = [f"done-{n:05d}" for n in range(count)]
    for n, job_id in enumerate(ids):
        events = [
            ev.Submitted(id=f"{job_id}-s", prompt=f"job {n}", agent="codex"),
            ev.Claimed(id=f"{job_id}-c", runner="r1"),
            ev.Started(id=f"{job_id}-r", runner="r1"),
            ev.Succeeded(id=f"{job_id}-ok", exit_code=0, result="done"),
        ]
        at = f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
        lines = [
            encode_entry(LogEntry(seq=seq, received_at=f"{at}.{seq:03d}Z", event=event))
            for seq, event in enumerate(events, 1)
        ]
        (ws.logs / job_id).mkdir(parents=True)
        (ws.logs / job_id / EVENTS_FILE).write_bytes(b"".join(lines))
    subprocess.run(mam("rebuild", "--workspace", str(ws.root)), check=True, cwd=ws.elsewhere, stdout=subprocess.DEVNULL)
    return ids


def forget_key(ws: WorkspacePaths) -> None:
    workspace = resolve(workspace=ws.root, env={})
    key_path(workspace).unlink()
    public_key_path(workspace).unlink()


def marker(ws: WorkspacePaths) -> Path:
    return key_path(resolve(workspace=ws.root, env={})).with_name(MARKER)


@asynccontextmanager
async def all_states(url: str, ws_id: str) -> AsyncIterator[aiomqtt.Client]:
    """A client subscribed to every job's state (the retained ones come at once), before anything else."""
    async with make_client(parse_broker_url(url)) as client:  # its queue an Inbox, read by `messages`
        await client.subscribe(Topics(ws_id).all_states, qos=1)
        yield client


async def signed_with_the_key(client: aiomqtt.Client, ws: WorkspacePaths, until: set[str]) -> list[str]:
    """The job ids of the states that verify with the workspace's key now, in the order they come,
    until each of `until` has come (states signed otherwise, older ones, are passed over)."""
    ws_id = workspace_id(ws.root)
    reader = StateReader(ws_id, load_workspace_key(resolve(workspace=ws.root, env={})), warn=lambda _job, _why: None)
    order: list[str] = []
    waiting = set(until)
    with anyio.fail_after(120):
        async for message in messages(client):
            payload = message.payload if isinstance(message.payload, bytes) else b""
            record = reader.record(str(message.topic), payload)
            if record is None:
                continue
            order.append(record.job_id)
            waiting.discard(record.job_id)
            if not waiting:
                return order
    raise AssertionError("the broker closed the connection")


async def test_after_a_new_key_a_new_job_is_recorded_before_every_old_state_is_signed_again(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    finished = finished_jobs(ws, 1_000 + 4 * CHUNK)
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as first:  # the key, and its session
        await first.wait_for_output(SIGNED_AGAIN, timeout=120)
    forget_key(ws)
    # Submitted as the projector starts: its event waits at the broker, in the projector's session,
    # and is handed over as it connects, before the background work has begun.
    submitted = ev.Submitted(id="new-job-s", prompt="the first new job", agent="codex")
    await publish(mosquitto.url, Topics(ws_id).events("new-job"), ev.encode_event(submitted))
    async with (
        all_states(mosquitto.url, ws_id) as client,
        projector_process(mosquitto, ws.root, ws.elsewhere) as projector,
    ):
        order = await signed_with_the_key(client, ws, {*finished, "new-job"})
        new_at = order.index("new-job")
        assert len(set(order[:new_at]) & set(finished)) < len(finished), "recorded only after the re-sign"
        await projector.wait_for_output(SIGNED_AGAIN, timeout=120)
    assert not marker(ws).exists()
    async with all_states(mosquitto.url, ws_id) as fresh:  # what a new subscriber gets: all of them, re-signed
        await signed_with_the_key(fresh, ws, {*finished, "new-job"})


async def re_signed_up_to(ws: WorkspacePaths, projector: Daemon) -> str:
    """The job id up to which the broker has acknowledged the re-signed states, once it is one
    (`resign.json` moved on; polled: a file another process writes)."""
    with anyio.fail_after(120):
        while not (after := json.loads(marker(ws).read_bytes() or b"{}").get("after")):
            assert projector.proc.poll() is None, projector.output()
            await anyio.sleep(0.01)  # polling a file the projector writes
    return after


async def test_a_projector_killed_during_the_re_sign_finishes_it_at_its_next_start(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    finished = finished_jobs(ws, 5_000)
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        key = load_workspace_key(resolve(workspace=ws.root, env={}))
        await re_signed_up_to(ws, projector)  # its first chunk is acknowledged: the background work has begun
        projector.kill9()
    after = json.loads(marker(ws).read_bytes())["after"]
    assert after < finished[-1], f"the re-sign of {len(finished)} states ended before the kill"
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as again:
        output = await again.wait_for_output(SIGNED_AGAIN, timeout=120)
    assert f"signed again in the background, from job {after}" in output, output
    left = sum(job_id > after for job_id in finished)
    assert f"{SIGNED_AGAIN} {left} job(s)" in output, "it went on from there, not from the start"
    assert not marker(ws).exists()
    assert fingerprint(load_workspace_key(resolve(workspace=ws.root, env={}))) == fingerprint(key), "the key stays"
    async with all_states(mosquitto.url, ws_id) as fresh:  # what a new subscriber gets: all of them, re-signed
        await signed_with_the_key(fresh, ws, set(finished))


async def test_under_mam_up_every_state_is_signed_with_the_new_key_and_recording_goes_on(ws: WorkspacePaths) -> None:
    """`mam up` puts the states straight into its own broker: the re-signed ones, and the 1,000 that
    finished last, which it restores between its first batches (its broker kept nothing)."""
    ws_id = workspace_id(ws.root)
    finished = finished_jobs(ws, 1_000 + 2 * CHUNK)
    async with up_with_flags(ws) as (port, up):
        url = f"mqtt://127.0.0.1:{port}"
        async with all_states(url, ws_id) as client:
            submitted = ev.Submitted(id="new-job-s", prompt="the first new job", agent="codex")
            await publish(url, Topics(ws_id).events("new-job"), ev.encode_event(submitted))
            await signed_with_the_key(client, ws, {*finished, "new-job"})
        await up.wait_for_output(SIGNED_AGAIN, timeout=120)
    assert not marker(ws).exists()
