"""Helpers the tests share: clean environments, real processes, waiting on messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import anyio

from mam.client.inbox import messages
from mam.contract.topics import Topics

TESTS = Path(__file__).resolve().parent
"""The suite's folder, where its data lives (agent_streams, corpus, mock_agent.py) whatever folder a test is in."""
CHECKOUT = TESTS.parent
BIN = Path(sys.executable).parent
AMBIENT = ("WORKSPACE_ROOT", "DELEGATE_JOB_LOGS_DIR", "MAM_BROKER_URL")
KEPT = ("MAM_ARTIFACTS_DIR",)
"""Where CI collects files a test saves (screenshots): names no workspace or broker, so it stays."""
DEAD_BROKER = "mqtt://127.0.0.1:9"
"""Where a test that forgot `--broker` would publish: nothing listens on the discard port."""


def scrub_environment(env: dict[str, str]) -> dict[str, str]:
    """Drop every variable that could point a test at a real workspace or broker."""
    for key in list(env):
        if (key.startswith("MAM_") and key not in KEPT) or key in AMBIENT:
            del env[key]
    env["MAM_BROKER_URL"] = DEAD_BROKER
    return env


def child_env(**extra: str | None) -> dict[str, str]:
    env = scrub_environment(dict(os.environ))
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def mam(*args: str) -> list[str]:
    return [str(BIN / "mam"), *args]


async def run(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(timeout):
        return await anyio.run_process(cmd, cwd=cwd, env=env or child_env(), input=input, check=False)


class Daemon:
    """A long-running child (projector, runner) stopped by its PID at the end."""

    def __init__(self, cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.cmd = cmd
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for_output(self, text: str, timeout: float) -> str:
        """The daemon's output once it holds `text` (its log file, read until then); it must not exit first."""
        with anyio.fail_after(timeout):
            while text not in (output := self.output()):
                assert self.proc.poll() is None, f"exited with {self.proc.returncode}: {output}"
                await anyio.sleep(0.02)  # polling the daemon's log file for the line that proves it
        return output

    async def wait(self, timeout: float = 20) -> int:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(self.proc.wait)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


def _client(url: str, **kwargs: Any) -> aiomqtt.Client:
    from mam.client.mqtt import make_client
    from mam.contract.broker_url import parse_broker_url

    return make_client(parse_broker_url(url), **kwargs)


async def wait_for_message(
    url: str, topic: str, predicate: Callable[[str, bytes], bool] = lambda t, p: True, *, timeout: float = 15
) -> tuple[str, bytes]:
    """Subscribe to `topic` and return the first message that satisfies `predicate`."""
    with anyio.fail_after(timeout):
        async with _client(url) as client:
            await client.subscribe(topic, qos=1)
            async for message in messages(client):
                payload = message.payload if isinstance(message.payload, bytes) else b""
                if message.topic.matches(topic) and predicate(str(message.topic), payload):
                    return str(message.topic), payload
    raise AssertionError("unreachable")


async def wait_projector_online(url: str, workspace_id: str, pid: int | None = None, timeout: float = 20) -> dict:
    def online(_: str, payload: bytes) -> bool:
        status = json.loads(payload or b"{}")
        return status.get("status") == "online" and (pid is None or status.get("pid") == pid)

    _, payload = await wait_for_message(url, Topics(workspace_id).projector_status, online, timeout=timeout)
    return json.loads(payload)


async def wait_for_state(
    url: str, workspace_id: str, job_id: str, predicate: Callable[[dict], bool] = lambda r: True, *, timeout: float = 15
) -> dict:
    def matches(_: str, payload: bytes) -> bool:
        return bool(payload) and predicate(json.loads(payload))

    _, payload = await wait_for_message(url, Topics(workspace_id).state(job_id), matches, timeout=timeout)
    return json.loads(payload)


async def publish(url: str, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> None:
    async with _client(url) as client:
        await client.publish(topic, payload, qos=qos, retain=retain)


def tree_snapshot(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    snap: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            snap[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return snap


async def journal_checkpointed(root: Path, timeout: float = 20) -> None:
    """Wait until the projector's checkpoint has covered every batch it journaled: the workspace's journal
    (`.mam/jobs/.journal/`) holds only empty segments (projector/checkpoint.py). Until then the checkpoint
    thread may still make a segment, seal and delete one: a snapshot of the tree taken before that sees the
    projector's own writes, not those of the command under test."""
    journal = root / ".mam" / "jobs" / ".journal"

    def holds_a_batch() -> bool:
        for segment in journal.glob("*.wal"):
            try:
                if segment.stat().st_size:
                    return True
            except FileNotFoundError:  # trimmed as we looked
                continue
        return False

    with anyio.fail_after(timeout):
        while holds_a_batch():
            await anyio.sleep(0.02)


class Watch:
    """`async with Watch(url, topic) as w:` subscribes first; then act, then `await w.next(...)`."""

    def __init__(self, url: str, topic: str) -> None:
        self.topic = topic
        self._client = _client(url)

    async def __aenter__(self) -> Watch:
        await self._client.__aenter__()
        await self._client.subscribe(self.topic, qos=1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.__aexit__(None, None, None)

    async def next(
        self, predicate: Callable[[str, bytes], bool] = lambda t, p: True, *, timeout: float = 15
    ) -> tuple[str, bytes]:
        with anyio.fail_after(timeout):
            async for message in messages(self._client):  # a timed-out wait keeps what came for the next
                payload = message.payload if isinstance(message.payload, bytes) else b""
                if message.topic.matches(self.topic) and predicate(str(message.topic), payload):
                    return str(message.topic), payload
        raise AssertionError("the broker closed the connection")

    async def json(self, predicate: Callable[[dict], bool] = lambda d: True, *, timeout: float = 15) -> dict:
        _, payload = await self.next(lambda _t, p: bool(p) and predicate(json.loads(p)), timeout=timeout)
        return json.loads(payload)


def processes_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line contains `text` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and text.encode() in cmdline:
            found.append(int(entry))
    return found


async def wait_for_json_file(path: Path, timeout: float = 30) -> dict:
    """The JSON another process writes at `path` (the runtime file), once it is there and whole."""
    with anyio.fail_after(timeout):
        while True:
            try:
                return json.loads(path.read_bytes())
            except (FileNotFoundError, ValueError):
                await anyio.sleep(0.02)  # polling for a file another process writes
