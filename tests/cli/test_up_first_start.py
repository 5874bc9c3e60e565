"""`mam up` says what happened, and only that (issue 43, part 5): a brand-new workspace starts quietly (no
re-signing, no index rebuilt from 0 records, no 0 states restored), while a workspace that had jobs still
says each; a second `mam up` on a served workspace prints only its real error; `mam up -v`'s MQTT example is
one line that makes a new job each time it is pasted, as written in bash, zsh and fish."""

from __future__ import annotations

import json
import os
import re

import pytest

from brokers import require_binary
from e2e import up_with_flags, workspace_id
from support import Watch, child_env, mam, run
from workspace_support import WorkspacePaths

NEW_WORKSPACE_NOISE = (
    "signed again",
    "query index",
    "restored the retained state of 0",
    "states of 0 job(s)",
    "stopped: 0 events",
)


async def test_a_new_workspace_starts_quietly_and_one_with_jobs_says_what_it_did(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, daemon):
        await daemon.wait_for_output("Ctrl-C stops both", timeout=20)
        first = daemon.output()
        submitted = await run(
            mam(
                "submit",
                "--agent",
                "shell",
                "--prompt",
                "p",
                "--job-id",
                "job-1",
                "--workspace",
                str(ws.root),
                "--broker",
                f"mqtt://127.0.0.1:{port}",
            ),
            cwd=ws.elsewhere,
        )
        assert submitted.returncode == 0, submitted.stderr
    for noise in NEW_WORKSPACE_NOISE:
        assert noise not in first, first
    assert "made the workspace's signing key" in first, "what it did make is said"
    os.remove(ws.root / ".mam" / "projector.key")  # an older workspace: its states signed with no key now,
    os.remove(ws.root / ".mam" / "projector.pub")
    os.remove(ws.jobs / ".index.sqlite")  # and no query index yet
    said = len(daemon.output())
    async with up_with_flags(ws) as (port, daemon):
        await daemon.wait_for_output("signed the retained states of 1 job(s) again", timeout=30)
        second = daemon.output()[said:]
    assert "states signed with an older key (or none) are signed again in the background" in second, second
    assert "query index: rebuilt from 1 record(s) (missing)" in second, second
    assert "restored the retained state of 1 job(s)" in second, second


async def test_a_second_mam_up_prints_only_its_real_error(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, daemon):
        second = await run(mam("up", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=30)
    assert second.returncode == 1, second.stderr
    lines = second.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert (
        lines[0].startswith(f"mam: error: another projector (pid {daemon.pid} on ")
        and "already serves this workspace" in lines[0]
    ), lines
    assert second.stdout == b""


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
async def test_the_mqtt_example_makes_a_new_job_each_time_it_is_pasted(shell: str, ws: WorkspacePaths) -> None:
    path = require_binary(shell)
    require_binary("mosquitto_pub")
    async with up_with_flags(ws, "-v") as (port, daemon):
        output = await daemon.wait_for_output("mosquitto_sub", timeout=20)
        [example] = [line.strip() for line in output.splitlines() if "mosquitto_pub" in line]
        ws_id = workspace_id(ws.root)
        async with Watch(f"mqtt://127.0.0.1:{port}", f"mam/{ws_id}/jobs/+/state") as states:
            printed = []
            for _ in range(2):  # pasted twice
                done = await run([path, "-c", example], cwd=ws.elsewhere, env=child_env(), timeout=30)
                assert done.returncode == 0, (example, done.stderr)
                printed.append(done.stdout.decode())
            recorded = [await states.json(lambda s: s["agent"] == "shell") for _ in range(2)]
    topics = [re.match(rf"mam/{ws_id}/jobs/([^/]+)/state ", line) for line in printed]
    ids = [found.group(1) for found in topics if found]
    assert len(ids) == 2 and ids[0] != ids[1], printed  # each paste printed its own job's state
    assert sorted(r["job_id"] for r in recorded) == sorted(ids) and {r["status"] for r in recorded} == {"submitted"}
    assert all(json.loads(line.split(" ", 1)[1])["job_id"] in ids for line in printed)
