"""`mam up` without `--port` keeps the port it had last time, and never fails for a taken 1883."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mam.cli.up import choose_port
from mam.contract.workspace import resolve

from brokers import free_port
from e2e import workspace_id
from support import BIN, Daemon, child_env, wait_for_json_file, wait_projector_online
from workspace_support import WorkspacePaths


@contextmanager
def listening() -> Iterator[int]:
    """A port someone else holds, for as long as the block runs."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.fast
def test_the_port_of_last_time_wins_while_it_is_free(ws: WorkspacePaths) -> None:
    workspace = resolve(workspace=ws.root, env={})
    assert choose_port("127.0.0.1", 4321, workspace) == (4321, None), "--port always wins"
    last = free_port()
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "up.json").write_text(json.dumps({"port": last}))
    assert choose_port("127.0.0.1", None, workspace) == (last, None)


@pytest.mark.fast
def test_taken_ports_fall_back_to_a_free_one_and_say_why(ws: WorkspacePaths) -> None:
    workspace = resolve(workspace=ws.root, env={})
    with listening() as last, listening() as standard:
        (ws.root / ".mam").mkdir()
        (ws.root / ".mam" / "up.json").write_text(json.dumps({"port": last}))
        port, why = choose_port("127.0.0.1", None, workspace, standard=standard)
    assert port == 0
    assert why is not None and f"port {last} of last time and port {standard} are taken" in why


async def test_a_restarted_mam_up_serves_on_the_same_port(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "up.json").write_text(json.dumps({"port": free_port()}))
    urls = []
    for attempt in range(2):
        up = Daemon(
            [str(BIN / "mam"), "up", "--workspace", str(ws.root)],
            cwd=ws.elsewhere,
            env=child_env(),
            log=ws.root.parent / f"up-{attempt}.log",
        )
        try:
            runtime = await wait_for_json_file(ws.root / ".mam" / "runtime.json")
            await wait_projector_online(runtime["broker"], workspace_id(ws.root), pid=up.pid)
            urls.append(runtime["broker"])
        finally:
            up.stop()
        assert not (ws.root / ".mam" / "runtime.json").exists()
    assert urls[0] == urls[1]
    assert json.loads((ws.root / ".mam" / "up.json").read_text())["port"] == int(urls[0].rsplit(":", 1)[1])
