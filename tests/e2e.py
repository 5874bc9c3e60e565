"""Building blocks for end-to-end tests: a projector process for a workspace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from mam.contract import events as ev
from mam.contract.broker_url import parse_broker_url
from mam.contract.workspace import resolve
from mam.projector.audit_log import AuditLog, LogEntry, encode_entry
from mam.projector.durable import SyncPlan
from mam.projector.registry import Registry, record_bytes
from mam.projector.replay import replay

from brokers import RunningBroker, wait_for_port
from support import BIN, Daemon, child_env, mam, wait_projector_online
from workspace_support import WorkspacePaths


def workspace_id(root: Path) -> str:
    return resolve(workspace=root, env={}).id


@asynccontextmanager
async def projector_process(
    broker: RunningBroker,
    root: Path,
    cwd: Path,
    *,
    via: str = "env",
    extra: tuple[str, ...] = (),
    log_dir: Path | None = None,
    online_within: float = 20,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Daemon]:
    """`mam-projector` for `root`, started from `cwd`, via `WORKSPACE_ROOT` or `--workspace`; `online_within`
    bounds the wait for its online status (many projectors started at once on a loaded machine need more);
    `env`: more of its environment."""
    cmd = [str(BIN / "mam-projector"), "--broker", broker.url, *extra]
    if via == "env":
        env = child_env(WORKSPACE_ROOT=str(root), **(env or {}))
    else:
        env = child_env(**(env or {}))
        cmd += ["--workspace", str(root)]
    logs = log_dir or root.parent
    daemon = Daemon(cmd, cwd=cwd, env=env, log=logs / f"projector-{len(list(logs.glob('projector-*')))}.log")
    try:
        await wait_projector_online(broker.url, workspace_id(root), pid=daemon.pid, timeout=online_within)
        yield daemon
    finally:
        daemon.stop()


@asynccontextmanager
async def up_process(root: Path, cwd: Path, port: int, *, log_dir: Path | None = None) -> AsyncIterator[Daemon]:
    """`mam up` for `root` on `port` (the same port across restarts), once its projector is online."""
    logs = log_dir or root.parent
    daemon = Daemon(
        [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(root)],
        cwd=cwd,
        env=child_env(),
        log=logs / f"up-{len(list(logs.glob('up-*')))}.log",
    )
    try:
        wait_for_port(port, daemon.proc)
        await wait_projector_online(f"mqtt://127.0.0.1:{port}", workspace_id(root), pid=daemon.pid)
        yield daemon
    finally:
        daemon.stop()


@asynccontextmanager
async def up_with_flags(ws: WorkspacePaths, *args: str, login: str | None = None) -> AsyncIterator[tuple[int, Daemon]]:
    """`mam up` for `ws` on a free port with extra flags, once its projector is online; with
    `login` (user:pass), its projector logs in as that user. The port is `mam up --port 0`'s, read
    from its runtime file: a port picked here and bound there could be taken in between by another
    test's process (it was, once, under load)."""
    daemon = Daemon(
        mam("up", "--port", "0", "--workspace", str(ws.root), *args),
        cwd=ws.elsewhere,
        env=child_env(MAM_BROKER_URL=f"mqtt://{login}@127.0.0.1:1" if login else None),
        log=ws.root.parent / "up.log",
    )
    try:
        port = await runtime_port(ws.root, daemon)
        url = f"mqtt://{login + '@' if login else ''}127.0.0.1:{port}"
        await wait_projector_online(url, workspace_id(ws.root), pid=daemon.pid)
        yield port, daemon
    finally:
        daemon.stop()


async def runtime_port(root: Path, daemon: Daemon, timeout: float = 30) -> int:
    """The port `mam up` (started as `daemon`) listens on, from the runtime file it writes once it listens."""
    path = root / ".mam" / "runtime.json"
    with anyio.fail_after(timeout):
        while daemon.proc.poll() is None:
            try:
                runtime = json.loads(path.read_bytes())
            except (FileNotFoundError, ValueError):
                runtime = {}
            if runtime.get("pid") == daemon.pid:
                return parse_broker_url(runtime["broker"]).port
            await anyio.sleep(0.02)  # polling for a file another process writes
    raise RuntimeError(f"mam up exited with {daemon.proc.returncode} before it listened: {daemon.output()[-500:]}")


def submit(job_id: str, event_id: str | None = None, prompt: str = "p") -> bytes:
    body = {"type": "submitted", "prompt": prompt, "agent": "a"}
    if event_id:
        body["id"] = event_id
    return json.dumps(body).encode()


def event(kind: str, event_id: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "id": event_id, **fields}).encode()


def job_streams(jobs: int, per_job: int, prefix: str = "") -> tuple[dict[str, list[str]], list[tuple[str, bytes]]]:
    """Each job's event ids, and all the payloads interleaved across jobs as many runners send them: each job
    `submitted`, `claimed`, `started`, then outputs. `prefix` sets a round's jobs apart (`r1-job-0`)."""
    expected = {f"{prefix}job-{j}": [f"{prefix}job-{j}-e{i}" for i in range(per_job)] for j in range(jobs)}
    payloads = []
    for i in range(per_job):
        for job_id, ids in expected.items():
            if i == 0:
                payloads.append((job_id, submit(job_id, ids[0])))
            elif i == 1:
                payloads.append((job_id, event("claimed", ids[1], runner="r")))
            elif i == 2:
                payloads.append((job_id, event("started", ids[2])))
            else:
                payloads.append((job_id, event("output", ids[i], text=f"line {i}\n")))
    return expected, payloads


def assert_log_and_registry_consistent(ws: WorkspacePaths, ws_id: str, expected: dict[str, list[str]]) -> None:
    """Every expected event is in its job's log exactly once, and every record is the fold of its log."""
    log, registry = AuditLog(ws.logs), Registry(ws.jobs)
    for job_id, ids in expected.items():
        entries = log.read(job_id)
        got = [e.event.id for e in entries]
        assert len(got) == len(set(got)), f"{job_id}: an event is in the audit log twice: {got}"
        # NATS redelivers an unacknowledged message after its ack_wait, behind newer ones:
        # nothing may be lost or doubled, but the applied order can differ from the sent one.
        assert sorted(got) == sorted(ids), f"{job_id}: audit log {got} != published {ids}"
        state = replay(job_id, ws_id, entries)
        assert state.record is not None
        assert registry.read_bytes(job_id) == record_bytes(state.record), f"{job_id}: record is not the fold of its log"


def write_job(ws: WorkspacePaths, job_id: str, *then: ev.Event) -> bytes:
    """A job's audit log (one submit, then the events `then`) and its record, written as the projector
    would; the record's bytes."""
    submitted = ev.Submitted(prompt="p", agent="a", id=f"{job_id}-s")
    entries = [
        LogEntry(seq=seq, received_at="2026-01-01T00:00:00.000Z", event=event)
        for seq, event in enumerate([submitted, *then], start=1)
    ]
    log = AuditLog(ws.logs)
    for entry in entries:
        log.append(job_id, encode_entry(entry), SyncPlan(durable=False))
    log.close()
    state = replay(job_id, workspace_id(ws.root), entries)
    assert state.record is not None
    data = record_bytes(state.record)
    Registry(ws.jobs).write(job_id, data)
    return data
