"""Derived state heals itself: a stale retained state and a remade signing key do not wedge runners.

Real mosquitto, real `mam-projector`, real `mam-agent --agent shell` running `sh`.

- Stale retained state. A broker restarted from an old snapshot of its retained messages (mosquitto
  after a `kill -9` between autosaves) shows finished jobs as `submitted` again, with the
  projector's own signature. A runner that claims from the states (`--no-offers`, or under a
  projector that does not offer) claims them; the projector refuses each claim. The refusal frees
  the runner's slot at once, and the projector republishes the registry's state of the job. A runner
  that takes offers never claims one: the projector offers only what its registry holds submitted.
- Remade key. The projector's key pair is removed and the projector restarted (it makes a new pair,
  writes `projector.pub`, announces the key and republishes every state with it): a runner already
  running reads the file again and goes on claiming. A key announced on `projector/status` that the
  file does not hold switches nothing. A `projector.pub` deleted under a running projector comes back.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from runner_support import TERMINAL, agent_runner, submit

from mam.contract.signing import fingerprint, key_path, load_workspace_key, public_key_b64, public_key_path
from mam.contract.topics import Topics
from mam.contract.workspace import resolve

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, mam, publish, run, wait_for_message, wait_for_state
from workspace_support import WorkspacePaths


@pytest.mark.parametrize("mode", ["no-offers", "offers"])
async def test_a_stale_retained_submitted_state_neither_holds_a_slot_nor_stays(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path, mode: str
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    ran = tmp_path / "ran.txt"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        # A job that finished (cancelled before any runner came), and its `submitted` state as the projector signed it.
        async with Watch(mosquitto.url, topics.state("old-1")) as watch:
            await submit(mosquitto.url, ws, "old-1", f"echo old >> {ran}", agent="shell")
            _, stale = await watch.next(lambda _t, p: bool(p) and json.loads(p)["status"] == "submitted")
            cancel = await run(
                mam("cancel", "old-1", "--broker", mosquitto.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert cancel.returncode == 0, cancel.stderr
            await watch.next(lambda _t, p: bool(p) and json.loads(p)["status"] == "cancelled")
        # The broker "restarts from an old snapshot": the retained state is the signed `submitted` again.
        await publish(mosquitto.url, topics.state("old-1"), stale, retain=True)
        flags = ("--no-offers",) if mode == "no-offers" else ()
        async with agent_runner(
            mosquitto.url, ws, "--profile", "shell", "--concurrency", "1", *flags, agent="shell", name="r1"
        ) as runner:
            await submit(mosquitto.url, ws, "new-1", f"echo new >> {ran}", agent="shell")
            new = await wait_for_state(mosquitto.url, ws_id, "new-1", lambda r: r["status"] in TERMINAL, timeout=30)
            if mode == "no-offers":  # it claimed the stale job, was refused, and the slot came back for new-1
                await runner.wait_for_output("job old-1: claim refused (expected_version 1 does not match", timeout=10)
            log = runner.output()
        if mode == "offers":  # new-1 ran through the one slot; the stale job was never offered, so never claimed
            assert "old-1" not in log, log
        # A fresh subscriber gets what the registry says, not the stale state: the refused claim made the
        # projector republish it. (Offered runners never claim it; a real broker restart also ends the
        # projector's connection, and it republishes on connecting: the next test.)
        _, now = await wait_for_message(mosquitto.url, topics.state("old-1"))
    assert new["status"] == "succeeded", (new, log)
    assert ran.read_text() == "new\n", "the stale job never ran, the new one did"
    if mode == "no-offers":
        assert json.loads(now)["status"] == "cancelled" and json.loads(now)["version"] == 2, now
        assert now.rstrip(b"\n") != stale.rstrip(b"\n")


async def test_a_connecting_projector_replaces_stale_retained_states_before_anyone_acts_on_them(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """The broker came back from an old snapshot while the projector was away (or it reconnects after
    the broker's restart): on connecting, it republishes the registry's state of every unfinished job
    and of those that finished last, so the stale `submitted` is gone without a claim refused first."""
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        async with Watch(mosquitto.url, topics.state("old-2")) as watch:
            await submit(mosquitto.url, ws, "old-2", "true", agent="shell")
            _, stale = await watch.next(lambda _t, p: bool(p) and json.loads(p)["status"] == "submitted")
            cancel = await run(
                mam("cancel", "old-2", "--broker", mosquitto.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert cancel.returncode == 0, cancel.stderr
            await watch.next(lambda _t, p: bool(p) and json.loads(p)["status"] == "cancelled")
    await publish(mosquitto.url, topics.state("old-2"), stale, retain=True)
    _, planted = await wait_for_message(mosquitto.url, topics.state("old-2"))
    assert json.loads(planted)["status"] == "submitted", "the stale state is what the broker holds now"
    async with Watch(mosquitto.url, topics.state("old-2")) as watch:
        await watch.next(lambda _t, p: json.loads(p)["status"] == "submitted")  # the retained copy, at once
        async with projector_process(mosquitto, ws.root, ws.elsewhere):
            _, healed = await watch.next(lambda _t, p: bool(p) and json.loads(p)["status"] == "cancelled")
    assert json.loads(healed)["version"] == 2


async def test_running_runners_follow_a_remade_key_and_ignore_one_the_file_does_not_hold(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    workspace = resolve(workspace=ws.root, env={})
    ran = tmp_path / "ran.txt"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        old = load_workspace_key(workspace)
        assert old is not None
    async with agent_runner(mosquitto.url, ws, "--profile", "shell", agent="shell", name="r1") as runner:
        # The documented way to a new key pair: remove both files, start the projector again.
        key_path(workspace).unlink()
        public_key_path(workspace).unlink()
        async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--heartbeat", "0.3")):
            new = load_workspace_key(workspace)
            assert new is not None and fingerprint(new) != fingerprint(old)
            await runner.wait_for_output(f"the projector's key is now {fingerprint(new)}", timeout=15)
            await submit(mosquitto.url, ws, "after-remake", f"echo one >> {ran}", agent="shell")
            record = await wait_for_state(
                mosquitto.url, ws_id, "after-remake", lambda r: r["status"] in TERMINAL, timeout=30
            )
            assert record["status"] == "succeeded" and record["runner"] == "r1", (record, runner.output())

            # projector.pub deleted under the running projector: written again at its next heartbeat.
            public_key_path(workspace).unlink()
            with anyio.fail_after(10):
                while not public_key_path(workspace).exists():
                    await anyio.sleep(0.05)  # polling for a file the projector writes
            assert load_workspace_key(workspace) is not None

            # A status announcing a key the file does not hold (anyone may publish one without ACLs).
            forged = Ed25519PrivateKey.generate().public_key()
            status = json.loads((await wait_for_message(mosquitto.url, topics.projector_status))[1])
            status["public_key"] = public_key_b64(forged)
            await publish(mosquitto.url, topics.projector_status, json.dumps(status).encode(), retain=True)
            await runner.wait_for_output(
                f"ignoring key {fingerprint(forged)} announced on projector/status", timeout=15
            )
            await submit(mosquitto.url, ws, "after-forgery", f"echo two >> {ran}", agent="shell")
            record = await wait_for_state(
                mosquitto.url, ws_id, "after-forgery", lambda r: r["status"] in TERMINAL, timeout=30
            )
            log = runner.output()
    assert record["status"] == "succeeded", (record, log)
    assert ran.read_text() == "one\ntwo\n"
    assert log.count(f"ignoring key {fingerprint(forged)}") == 1, log
    assert "the projector's key is now" in log and log.count("the projector's key is now") == 1, log
