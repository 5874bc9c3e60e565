"""`mam up` and `mam-broker` on the command line: one-line usage errors, no anonymous
broker off loopback unless asked, a banner that says where it really listens, and a
registry that stays out of `git status`."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from mam.broker.config import is_loopback
from mam.contract.workspace import resolve

from brokers import BIN, free_port, require_binary, wait_for_port
from e2e import submit, up_process, workspace_id
from support import Daemon, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

BROKER = [str(BIN / "mam-broker")]


def one_line(stderr: bytes) -> str:
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {stderr.decode()}"
    assert "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["mam up", "mam-broker"])
@pytest.mark.parametrize("value", ["99999", "abc", "-1"])
async def test_a_bad_port_is_a_one_line_usage_error_naming_flag_and_value(
    command: str, value: str, ws: WorkspacePaths
) -> None:
    argv = mam("up", "--workspace", str(ws.root)) if command == "mam up" else list(BROKER)
    result = await run([*argv, "--port", value], cwd=ws.elsewhere)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert "--port" in line and value in line, line
    assert not list(ws.root.iterdir()), "a usage error creates nothing"


@pytest.mark.parametrize("command", ["mam up", "mam-broker"])
async def test_a_taken_port_is_a_one_line_error_naming_the_port(command: str, ws: WorkspacePaths) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = mam("up", "--workspace", str(ws.root)) if command == "mam up" else list(BROKER)
        result = await run([*argv, "--port", str(port)], cwd=ws.elsewhere, timeout=20)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert f"port {port}" in line and "already in use" in line, line


@pytest.mark.parametrize("command", ["mam up", "mam-broker"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7"])
async def test_an_anonymous_broker_off_loopback_is_refused_naming_the_flags_to_pass(
    command: str, host: str, ws: WorkspacePaths
) -> None:
    argv = mam("up", "--workspace", str(ws.root)) if command == "mam up" else list(BROKER)
    result = await run([*argv, "--host", host, "--port", "0"], cwd=ws.elsewhere, timeout=20)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert repr(host) in line and "not a loopback address" in line, line
    assert "--password-file" in line and "--allow-anonymous" in line, line
    assert not list(ws.root.iterdir()), "a refused start creates nothing"


@pytest.mark.fast
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("localhost", True),
        ("LocalHost", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.10", False),
        ("fe80::1", False),
        ("example.com", False),
    ],
)
def test_only_127_8_and_ipv6_loopback_and_localhost_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_allow_anonymous_on_all_interfaces_banner_tells_the_bound_address_and_a_working_example(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    """Also `mam up -v`: -v after the subcommand turns on mam's debug logging, not the libraries'."""
    port, ws_id = free_port(), workspace_id(ws.root)
    up = Daemon(
        mam("up", "--host", "0.0.0.0", "--allow-anonymous", "--port", str(port), "--workspace", str(ws.root), "-v"),
        cwd=ws.elsewhere,
        env=child_env(),
        log=tmp_path / "up.log",
    )
    try:
        output = await up.wait_for_output("mam up: Ctrl-C stops both.", timeout=15)
        lines = output.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("mam up: broker"))
        assert lines[at].split()[-1] == f"mqtt://127.0.0.1:{port}", "the URL clients here use, last on its line"
        assert lines[at + 1] == f"mam up: listening 0.0.0.0:{port}, all interfaces", lines[at + 1]
        assert "--allow-anonymous: anyone who can reach this broker can submit jobs" in output
        assert f"embedded broker listening on 0.0.0.0:{port}" in output, "-v after `up` logs debug lines"
        assert "Broker started" not in output and "State transition" not in output, "amqtt's debug is -vv's"

        example = next(line.strip() for line in output.splitlines() if "mosquitto_pub" in line)
        assert example.startswith("sh -c '") and "mosquitto_sub " in example and "-C 1" in example, example
        assert f'-t "mam/{ws_id}/jobs/$job/events"' in example and f"-h 127.0.0.1 -p {port}" in example, example
        require_binary("mosquitto_pub")
        read = await run(shlex.split(example), cwd=ws.elsewhere, timeout=30)  # publishes, then reads the state
        assert read.returncode == 0, read.stderr
        topic, payload = read.stdout.decode().split(" ", 1)
        job = re.fullmatch(rf"mam/{ws_id}/jobs/(hello-\d+-\d+)/state", topic)
        assert job is not None, topic
        assert json.loads(payload)["status"] == "submitted" and json.loads(payload)["job_id"] == job[1]
    finally:
        up.stop()
    assert up.proc.returncode == 0, up.output()


@pytest.mark.fast
def test_each_start_gets_its_own_example_job_id() -> None:
    from mam.cli.banner import example_job_id

    ids = {example_job_id() for _ in range(20)}
    assert len(ids) > 1 and all(re.fullmatch(r"hello-[0-9a-f]{4}", i) for i in ids)


async def test_mam_broker_says_where_it_listens_and_takes_v_after_its_flags(tmp_path: Path) -> None:
    port = free_port()
    broker = Daemon(
        [*BROKER, "--host", "0.0.0.0", "--allow-anonymous", "--port", str(port), "-v"],
        cwd=tmp_path,
        env=child_env(),
        log=tmp_path / "broker.log",
    )
    try:
        wait_for_port(port, broker.proc)
        output = await broker.wait_for_output(f"mam-broker: listening on 0.0.0.0:{port}, all interfaces", timeout=15)
        assert f"mqtt://127.0.0.1:{port}" in output
        assert f"embedded broker listening on 0.0.0.0:{port}" in output, "-v logs debug lines"
    finally:
        broker.stop()


@pytest.mark.fast
def test_v_is_accepted_before_and_after_up() -> None:
    from mam.broker.cli import build_parser as broker_parser
    from mam.cli import build_parser

    assert build_parser().parse_args(["-v", "up"]).verbose == 1
    assert build_parser().parse_args(["up", "-v"]).verbose == 1
    assert build_parser().parse_args(["up", "-vv"]).verbose == 2
    assert build_parser().parse_args(["up"]).verbose == 0
    assert broker_parser().parse_args(["-v", "--port", "0"]).verbose == 1
    assert broker_parser().parse_args(["--port", "0", "-v"]).verbose == 1


@pytest.mark.parametrize("flag", ["-v", "-vv"])
async def test_mam_broker_v_logs_mam_lines_and_vv_the_libraries_too(flag: str, tmp_path: Path) -> None:
    port = free_port()
    broker = Daemon([*BROKER, "--port", str(port), flag], cwd=tmp_path, env=child_env(), log=tmp_path / "broker.log")
    try:
        wait_for_port(port, broker.proc)
        output = await broker.wait_for_output(f"mam-broker: listening on 127.0.0.1:{port}", timeout=15)
    finally:
        broker.stop()
    assert f"embedded broker listening on 127.0.0.1:{port}" in output, "mam's own debug line at -v and -vv"
    library = [line for line in output.splitlines() if "Broker started" in line or "State transition" in line]
    assert bool(library) is (flag == "-vv"), output


async def test_mam_up_keeps_the_registry_out_of_git_status(ws: WorkspacePaths) -> None:
    git = require_binary("git")
    subprocess.run([git, "init", "-q", str(ws.root)], check=True)
    (ws.root / "README").write_text("tracked\n")
    port, ws_id = free_port(), workspace_id(ws.root)
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        await publish(url, f"mam/{ws_id}/jobs/j1/events", submit("j1"))
        await wait_for_state(url, ws_id, "j1")
        assert (ws.jobs / "j1.json").is_file() and (ws.logs / "j1" / "events.jsonl").is_file()
        status = await run([git, "status", "--porcelain", "--untracked-files=all"], cwd=ws.root)
    assert status.returncode == 0, status.stderr
    assert status.stdout.decode().splitlines() == ["?? README"], status.stdout
    assert (ws.root / ".mam" / ".gitignore").read_text().splitlines()[-1] == "*"


@pytest.mark.fast
def test_a_users_own_mam_gitignore_is_never_replaced(ws: WorkspacePaths) -> None:
    from mam.registry.runtime import ignore_in_git

    (ws.root / ".mam").mkdir()
    own = ws.root / ".mam" / ".gitignore"
    own.write_text("jobs/\n")
    assert ignore_in_git(resolve(workspace=ws.root, env={})) is None
    assert own.read_text() == "jobs/\n"


@pytest.mark.fast
def test_no_mam_dir_is_made_for_a_gitignore_when_the_registry_lives_elsewhere(ws: WorkspacePaths) -> None:
    from mam.registry.runtime import ignore_in_git

    workspace = resolve(workspace=ws.root, registry=ws.elsewhere / "jobs", env={})
    assert ignore_in_git(workspace) is None
    assert not (ws.root / ".mam").exists()


async def test_the_banner_is_short_and_its_next_two_commands_run_as_printed(ws: WorkspacePaths, tmp_path: Path) -> None:
    """Without -v: where it listens, the workspace, the dashboard, a runner and a job to submit
    (for `shell`, which runs anywhere), and how to see the rest; the internals stay behind -v."""
    port = free_port()
    up = Daemon(
        mam("up", "--port", str(port), "--workspace", str(ws.root), "--dashboard", "0"),
        cwd=ws.elsewhere,
        env=child_env(),
        log=tmp_path / "up.log",
    )
    runner: Daemon | None = None
    try:
        output = await up.wait_for_output("mam up: dashboard http", timeout=20)
        banner = [line for line in output.splitlines() if line.startswith("mam up:")]
        assert len(banner) <= 6, "\n".join(banner)
        assert banner[0] == f"mam up: broker    mqtt://127.0.0.1:{port}", banner[0]
        assert f"mam up: workspace {workspace_id(ws.root)}  (root {ws.root})" in banner
        assert "mam up -v" in output and "mosquitto_pub" not in output and "registry" not in output
        runner_line = next(line for line in banner if line.startswith("mam up: next, a runner:"))
        submit_line = next(line for line in banner if line.startswith("mam up: then a job:"))
        runner_cmd = shlex.split(runner_line.split(":", 2)[2])
        submit_cmd = shlex.split(submit_line.split(":", 2)[2])
        assert "--agent" in runner_cmd and runner_cmd[runner_cmd.index("--agent") + 1] == "shell", runner_cmd

        shell = child_env(MAM_BROKER_URL=None)  # a fresh shell: the commands find the broker on their own
        async with Watch(f"mqtt://127.0.0.1:{port}", f"mam/{workspace_id(ws.root)}/agents/+/status") as status:
            runner = Daemon(runner_cmd, cwd=ws.elsewhere, env=shell, log=tmp_path / "runner.log")
            await status.json(lambda s: s["status"] == "online" and s["pid"] == runner.pid, timeout=30)
        submitted = await run(submit_cmd, cwd=ws.elsewhere, env=shell, timeout=60)
        assert submitted.returncode == 0, submitted.stderr.decode() + submitted.stdout.decode()
        assert "hello\n" in submitted.stdout.decode(), "--follow streams the job's output and exits 0 once it succeeded"
        stop_line = next(line for line in up.output().splitlines() if line.startswith("mam up: Ctrl-C stops both."))
        assert "MQTT 3.1.1, MQTT 5: docs/brokers.md#interop" in stop_line, stop_line
    finally:
        if runner is not None:
            runner.stop()
        up.stop()
