"""The projector as a process: presence, the workspace lock, reconnects."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brokers import BROKERS, RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_projector_announces_itself_and_its_will_marks_it_offline(
    broker: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(broker, ws.root, ws.elsewhere) as projector:
        async with Watch(broker.url, f"mam/{ws_id}/projector/status") as status:
            online = await status.json(lambda s: s["status"] == "online")
            assert online["pid"] == projector.pid
            assert online["registry_dir"] == str(ws.jobs) and online["logs_dir"] == str(ws.logs)
            assert online["workspace"] == ws_id
            projector.kill9()
            offline = await status.json(lambda s: s["status"] == "offline", timeout=45)
            assert offline["pid"] == projector.pid


async def test_clean_stop_publishes_offline(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        async with Watch(amqtt.url, f"mam/{ws_id}/projector/status") as status:
            await status.json(lambda s: s["status"] == "online")
            projector.stop()
            assert projector.proc.returncode == 0
            offline = await status.json(lambda s: s["status"] == "offline")
            assert offline["detail"] == "stopped"


async def test_second_projector_exits_at_once_naming_the_holder(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere) as first:
        second = await run(
            [str(BIN / "mam-projector"), "--broker", amqtt.url, "--workspace", str(ws.root)],
            cwd=ws.elsewhere,
            timeout=20,
        )
        assert second.returncode == 1
        assert f"pid {first.pid}".encode() in second.stderr and b"Traceback" not in second.stderr


async def test_stale_lock_of_a_killed_projector_does_not_block(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere) as first:
        first.kill9()
    assert json.loads((ws.jobs / ".projector.lock").read_bytes())["pid"] == first.pid
    async with projector_process(amqtt, ws.root, ws.elsewhere) as second:
        assert second.proc.poll() is None


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_projector_reconnects_after_broker_restart(kind: str, ws: WorkspacePaths, tmp_path: Path) -> None:
    ws_id = workspace_id(ws.root)
    with BROKERS[kind](tmp_path / "own-broker") as broker:
        async with projector_process(broker, ws.root, ws.elsewhere) as projector:
            await publish(
                broker.url, f"mam/{ws_id}/jobs/before/events", b'{"type":"submitted","prompt":"p","agent":"a"}'
            )
            await wait_for_state(broker.url, ws_id, "before")
            broker.restart()
            from support import wait_projector_online

            await wait_projector_online(broker.url, ws_id, pid=projector.pid, timeout=30)
            await publish(
                broker.url, f"mam/{ws_id}/jobs/after/events", b'{"type":"submitted","prompt":"p","agent":"a"}'
            )
            await wait_for_state(broker.url, ws_id, "after")
            assert (ws.jobs / "before.json").is_file() and (ws.jobs / "after.json").is_file()
            assert projector.proc.poll() is None


def test_broker_cli_port_zero_prints_its_url_and_a_taken_port_is_one_line(tmp_path: Path) -> None:
    import socket
    import subprocess

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(BIN / "mam-broker"), "--port", str(port)],
            capture_output=True,
            env=child_env(),
            timeout=20,
            cwd=tmp_path,
        )
    assert result.returncode == 2
    err = result.stderr.decode()
    assert f"port {port} on 127.0.0.1 is already in use" in err and "--port" in err and "--broker" in err
    assert err.count("\n") == 1 and "Traceback" not in err

    proc = subprocess.Popen(
        [str(BIN / "mam-broker"), "--port", "0"], stdout=subprocess.PIPE, env=child_env(), cwd=tmp_path
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("mqtt://127.0.0.1:") and int(line.rsplit(":", 1)[1]) > 0
        with socket.create_connection(("127.0.0.1", int(line.rsplit(":", 1)[1])), timeout=5):
            pass
    finally:
        proc.send_signal(2)
        assert proc.wait(15) == 0


async def test_mam_up_serves_a_workspace_and_stops_on_ctrl_c(ws: WorkspacePaths) -> None:
    import shlex
    import shutil
    import signal
    import subprocess

    # -v: the full banner (the export and mosquitto lines) and debug logging, to a file, never a full pipe.
    err = (ws.root.parent / "up.err").open("wb")
    proc = subprocess.Popen(
        mam("up", "--port", "0", "--workspace", str(ws.root), "-v"),
        cwd=ws.elsewhere,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=err,
    )
    try:
        assert proc.stdout is not None
        banner = [proc.stdout.readline().decode() for _ in range(9)]
        url = banner[0].split()[-1]
        assert url.startswith("mqtt://127.0.0.1:")
        printed = next(line for line in banner if "mosquitto_pub" in line)
        assert '\\"agent\\":\\"shell\\"' in printed, printed
        example = shlex.split(printed)  # one line for sh: a new job id each time (tests/cli/test_up_first_start.py)
        assert example[:2] == ["sh", "-c"] and "mosquitto_pub " in example[2] and "mosquitto_sub " in example[2]
        port = url.rsplit(":", 1)[1]
        ws_id = workspace_id(ws.root)
        assert f'-t "mam/{ws_id}/jobs/$job/events"' in example[2], example
        async with Watch(url, f"mam/{ws_id}/jobs/+/state") as state:
            published = await run([shutil.which("sh") or "sh", *example[1:]], cwd=ws.elsewhere)  # as printed
            assert published.returncode == 0 and port in example[2], published.stderr
            record = await state.json()
        job_id = record["job_id"]
        assert published.stdout.decode().startswith(f"mam/{ws_id}/jobs/{job_id}/state ")
        assert record["status"] == "submitted" and record["agent"] == "shell", "the example is for a runner anyone has"
        export = next(line for line in banner if "export MAM_BROKER_URL=" in line).split("=", 1)[1].strip()
        assert export == url
        submit = await run(
            mam("submit", "--prompt", "via env", "--agent", "a", "--wait", "--json"),
            cwd=ws.elsewhere,
            env=child_env(WORKSPACE_ROOT=str(ws.root), MAM_BROKER_URL=export),
        )
        assert submit.returncode == 0, submit.stderr
        assert json.loads(submit.stdout)["prompt"] == "via env"
        info = await run(mam("workspace", "--json"), cwd=ws.elsewhere, env=child_env(WORKSPACE_ROOT=str(ws.root)))
        assert json.loads(info.stdout)["projector"]["broker"] == url
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
        err.close()
    assert code == 0, (ws.root.parent / "up.err").read_text()
    assert os.path.isfile(ws.jobs / f"{job_id}.json")
