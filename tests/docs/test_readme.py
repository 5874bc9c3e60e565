"""The README's quick start runs as written: `mam up`, a runner, then the submit lines.

The blocks are read from the README itself (after their `<!-- quickstart: ... -->`
markers), so the test and the page cannot drift apart. They run in a stand-in
checkout whose `.venv` is this test run's virtual environment; the install line is
the README's own test command, which CI runs anyway, so it is skipped here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from brokers import free_port
from support import BIN, CHECKOUT, Daemon, Watch, child_env, run, wait_for_json_file

README = CHECKOUT / "README.md"


def quickstart_block(name: str) -> list[str]:
    """The command lines of the fenced block after `<!-- quickstart: name -->`."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- quickstart: {name} -->\n```sh\n(.*?)```", text, re.S)
    assert match, f"README has no quickstart block {name!r}"
    return [line for line in match.group(1).splitlines() if line.strip()]


async def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / ".venv").symlink_to(BIN.parent)
    # "The port it had last time": seeded, so this run never binds the machine's 1883.
    (checkout / ".mam").mkdir()
    (checkout / ".mam" / "up.json").write_text(json.dumps({"port": free_port()}))
    env = child_env(MAM_BROKER_URL=None)

    up_lines = quickstart_block("up")
    assert up_lines[0].startswith("python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e .")
    (up_line,) = up_lines[1:]
    (runner_line,) = quickstart_block("runner")
    submit_lines = quickstart_block("submit")

    up = Daemon(["bash", "-c", f"exec {up_line}"], cwd=checkout, env=env, log=tmp_path / "up.log")
    runner: Daemon | None = None
    try:
        runtime = await wait_for_json_file(checkout / ".mam" / "runtime.json")
        assert runtime["pid"] == up.pid
        async with Watch(runtime["broker"], "mam/+/agents/+/status") as status:
            runner = Daemon(["bash", "-c", f"exec {runner_line}"], cwd=checkout, env=env, log=tmp_path / "runner.log")
            await status.json(lambda s: s["status"] == "online" and s["pid"] == runner.pid, timeout=30)
        script = "set -euo pipefail\n" + "\n".join(submit_lines) + "\n"
        result = await run(["bash", "-c", script], cwd=checkout, env=env, timeout=90)
    finally:
        if runner is not None:
            runner.stop()
        up.stop()
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}\nrunner:\n{runner.output() if runner else ''}"
    assert "hello from a job\nLinux\n" in out, f"stdout:\n{out}\nstderr:\n{err}"
    assert "1\n2\n3\n" in out
    assert re.search(r"^JOB\s+STATUS", out, re.M) and out.count("succeeded") >= 2
    assert "Traceback" not in err + up.output()


async def test_the_suites_guard_leaves_a_quick_start_serving_the_checkout_alone(tmp_path: Path) -> None:
    """The README's test command passes while its Quick start's `mam up` serves the same checkout: the
    guard (conftest.py) leaves that live workspace's `.mam/` out, and only while it is served."""
    from workspace_support import served_workspace

    checkout = tmp_path / "checkout"
    (checkout / ".mam").mkdir(parents=True)
    (checkout / ".venv").symlink_to(BIN.parent)
    (checkout / ".mam" / "up.json").write_text(json.dumps({"port": free_port()}))
    assert not served_workspace(checkout)
    (up_line,) = quickstart_block("up")[1:]
    up = Daemon(
        ["bash", "-c", f"exec {up_line}"], cwd=checkout, env=child_env(MAM_BROKER_URL=None), log=tmp_path / "up.log"
    )
    try:
        runtime = await wait_for_json_file(checkout / ".mam" / "runtime.json")
        assert runtime["pid"] == up.pid and served_workspace(checkout), "served: its writes are its own"
    finally:
        up.stop()
    assert not served_workspace(checkout), "stopped: `.mam/` is guarded again"
