"""Signed states: a runner runs only what the projector recorded, whatever the broker lets through.

The threat: on a broker without ACLs any client can publish retained states.
Read a runner's id and epoch from its retained status, publish a `submitted`
then a `claimed` state naming it for a job the registry never had, and an
unverified runner runs the forged prompt. Here the runner (a real
`mam-agent --agent shell`, real `sh`) must refuse such states with one
warning per job and go on running genuine jobs.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from runner_support import TERMINAL, agent_runner, log_events, submit
from signed_states_support import forged_state, heard_of, refused, runner_epoch

from mam.contract.record import Status
from mam.contract.signing import (
    StateReader,
    fingerprint,
    load_workspace_key,
    public_key_b64,
    public_key_path,
    sign_payload,
)
from mam.contract.topics import Topics
from mam.contract.workspace import resolve

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, DEAD_BROKER, Daemon, Watch, child_env, mam, publish, run, wait_for_message, wait_for_state
from workspace_support import WorkspacePaths

# -- a real runner, a real broker with no ACL -----------------------------------------------------------------------


async def test_forged_states_on_a_broker_without_acl_never_run_and_the_runner_goes_on(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    markers = tmp_path / "markers"
    markers.mkdir()
    topics = Topics(ws_id)
    attacker = Ed25519PrivateKey.generate()
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere),
        agent_runner(mosquitto.url, ws, "--profile", "shell", "--no-offers", agent="shell", name="victim") as runner,
    ):
        # --no-offers: a runner that reads every state and says which it ignores (taking offers, it reads only
        # the states of the jobs it is offered, claims or runs, each verified the same way)
        epoch = await runner_epoch(mosquitto.url, ws_id, "victim")
        for job_id, sign in (("forged-1", None), ("forged-2", attacker)):
            prompt = f"touch {markers / job_id}"
            for payload in (
                forged_state(ws_id, job_id, prompt),
                forged_state(
                    ws_id, job_id, prompt, status=Status.CLAIMED, runner="victim", runner_epoch=epoch, version=2
                ),
            ):
                await publish(
                    mosquitto.url, topics.state(job_id), sign_payload(payload, sign) if sign else payload, retain=True
                )
        await runner.wait_for_output("job 'forged-1': ignoring a state that carries no signature", timeout=20)
        await runner.wait_for_output(
            "job 'forged-2': ignoring a state that carries a signature that does not verify", timeout=20
        )
        # The runner reads states in order: once it has run a genuine job submitted after the
        # forgeries, it has long processed (and refused) all four of them.
        await submit(mosquitto.url, ws, "real-1", f"touch {markers / 'real-1'}", agent="shell")
        real = await wait_for_state(mosquitto.url, ws_id, "real-1", lambda r: r["status"] in TERMINAL, timeout=30)
        log = runner.output()
    assert real["status"] == "succeeded", real
    assert sorted(p.name for p in markers.iterdir()) == ["real-1"], "a forged prompt ran"
    assert log.count("job 'forged-1': ignoring") == 1 and log.count("job 'forged-2': ignoring") == 1, log
    assert "claimed" not in "".join(line for line in log.splitlines() if "forged" in line)
    for job_id in ("forged-1", "forged-2"):
        assert not (ws.jobs / f"{job_id}.json").exists(), "the registry has no such job"
        assert heard_of(ws, job_id) == [], "the runner sent nothing about the forged job"


async def test_a_genuine_state_replayed_on_another_job_or_again_on_its_own_runs_nothing(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """A state signed for job A, republished on job B's topic, is refused; A's own old states
    replayed after A ran (its `submitted`, then its `claimed` naming this very runner) start nothing."""
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    ran = tmp_path / "ran.txt"
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere),
        agent_runner(mosquitto.url, ws, "--profile", "shell", "--no-offers", agent="shell", name="r1") as runner,
    ):
        seen: dict[str, bytes] = {}  # --no-offers: it reads (and judges) every state, as in the test above
        async with Watch(mosquitto.url, topics.state("job-a")) as watch:
            await submit(mosquitto.url, ws, "job-a", f"echo a >> {ran}", agent="shell")
            for status in ("submitted", "claimed", "succeeded"):
                _, seen[status] = await watch.next(lambda _t, p, s=status: json.loads(p)["status"] == s, timeout=30)
        await publish(mosquitto.url, topics.state("job-b"), seen["submitted"], retain=True)
        await runner.wait_for_output(
            "job 'job-b': ignoring a state that carries the projector's signature for job "
            "'job-a', not for this topic's job",
            timeout=20,
        )
        await publish(mosquitto.url, topics.state("job-a"), seen["submitted"], retain=True)
        await publish(mosquitto.url, topics.state("job-a"), seen["claimed"], retain=True)
        await submit(mosquitto.url, ws, "job-c", f"echo c >> {ran}", agent="shell")
        await wait_for_state(mosquitto.url, ws_id, "job-c", lambda r: r["status"] == "succeeded", timeout=30)
        log = runner.output()
    assert ran.read_text() == "a\nc\n", "job A ran once, job B never"
    assert [e["type"] for e in log_events(ws, "job-a")].count("claimed") == 1
    assert heard_of(ws, "job-b") == [] and refused(ws, "job-a") == [], "no claim was made of either"
    assert log.count("job 'job-b': ignoring") == 1


async def test_a_runner_without_any_key_refuses_to_start_in_one_line(ws: WorkspacePaths) -> None:
    result = await run(
        [str(BIN / "mam-agent"), "--agent", "shell", "--workspace", str(ws.root), "--broker", DEAD_BROKER],
        cwd=ws.elsewhere,
    )
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1, result.stderr
    line = result.stderr.decode()
    assert line.startswith(f"mam-agent: error: no projector key for workspace {workspace_id(ws.root)}: ")
    assert "start the workspace's projector first" in line and "--projector-key FILE|sha256:FINGERPRINT" in line
    assert not (ws.root / ".mam").exists(), "a refused start creates nothing"


def runner_elsewhere(url: str, root: Path, ws_id: str, key: str, log: Path) -> Daemon:
    """`mam-agent` for a workspace dir that has no key file (same workspace id, another directory)."""
    cmd = [
        str(BIN / "mam-agent"),
        "--agent",
        "shell",
        "--profile",
        "shell",
        "--broker",
        url,
        "--workspace",
        str(root),
        "--workspace-id",
        ws_id,
        "--agent-id",
        "remote",
        "--projector-key",
        key,
    ]
    return Daemon(cmd, cwd=root, env=child_env(), log=log)


@pytest.mark.parametrize("form", ["fingerprint", "file"])
async def test_projector_key_flag_lets_a_runner_without_the_key_file_run_jobs(
    form: str, mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    remote = tmp_path / "remote"
    remote.mkdir()
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        status = json.loads((await wait_for_message(mosquitto.url, Topics(ws_id).projector_status))[1])
        workspace = resolve(workspace=ws.root, env={})
        key = load_workspace_key(workspace)
        assert key is not None and status["public_key"] == public_key_b64(key), "projector/status carries the key"
        if form == "file":
            copy = tmp_path / "projector.pub"
            copy.write_bytes(public_key_path(workspace).read_bytes())
            given = str(copy)
        else:
            given = fingerprint(key)
        runner = runner_elsewhere(mosquitto.url, remote, ws_id, given, tmp_path / "remote.log")
        try:
            await submit(mosquitto.url, ws, "job-r", "echo from afar", agent="shell")
            record = await wait_for_state(mosquitto.url, ws_id, "job-r", lambda r: r["status"] in TERMINAL, timeout=30)
        finally:
            runner.stop()
    assert record["status"] == "succeeded" and record["runner"] == "remote", (record, runner.output())
    assert not (remote / ".mam").exists()
    assert f"states are verified with the projector's key {fingerprint(key)}" in runner.output()


async def test_a_wrong_fingerprint_refuses_once_the_projector_announces_its_key(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    remote = tmp_path / "remote"
    remote.mkdir()
    wrong = "sha256:" + "0" * 64
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        key = load_workspace_key(resolve(workspace=ws.root, env={}))
        assert key is not None
        runner = runner_elsewhere(mosquitto.url, remote, ws_id, wrong, tmp_path / "remote.log")
        try:
            code = await runner.wait(timeout=30)
        finally:
            runner.stop()
    errors = [line for line in runner.output().splitlines() if "error" in line]
    assert code == 2 and errors == [
        f"mam-agent: error: --projector-key {wrong}: the projector of workspace {ws_id} announces key "
        f"{fingerprint(key)}; pass the fingerprint it logs at start, or its projector.pub file"
    ], runner.output()


async def test_a_malformed_fingerprint_is_a_usage_error(ws: WorkspacePaths) -> None:
    result = await run(
        [
            str(BIN / "mam-agent"),
            "--agent",
            "shell",
            "--workspace",
            str(ws.root),
            "--broker",
            DEAD_BROKER,
            "--projector-key",
            "sha256:abc",
        ],
        cwd=ws.elsewhere,
    )
    assert result.returncode == 2
    assert (
        result.stderr.decode() == "mam-agent: error: --projector-key sha256:abc: a fingerprint is sha256: and 64 "
        "hex digits\n"
    )


# -- local clients: a forged state fakes no verdict ----------------------------------------------------------------


async def test_a_follower_ignores_a_forged_outcome_and_says_so_once(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        await submit(mosquitto.url, ws, "job-f", "never run", agent="nobody")
        follower = Daemon(
            mam("logs", "job-f", "-f", "--broker", mosquitto.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            log=tmp_path / "follow.log",
        )
        try:
            forged = forged_state(ws_id, "job-f", "never run", status=Status.SUCCEEDED, exit_code=0, version=9)
            for _ in range(3):
                await publish(mosquitto.url, topics.state("job-f"), forged, retain=True)
            await follower.wait_for_output("ignoring a state of job 'job-f' that carries no signature", timeout=20)
            cancelled = await run(
                mam("cancel", "job-f", "--broker", mosquitto.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert cancelled.returncode == 0, cancelled.stderr
            code = await follower.wait(timeout=30)
        finally:
            follower.stop()
    assert code == 1, "the follower ended on the genuine outcome (cancelled), not the forged success"
    assert follower.output().count("ignoring a state of job 'job-f'") == 1, follower.output()


async def test_local_clients_take_the_projectors_states_and_refuse_an_unsigned_one(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """What `mam submit`/`cancel` wait with: the workspace's key from beside the registry dir."""
    ws_id = workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        reader = StateReader.for_workspace(resolve(workspace=ws.root, env={}), warn=lambda j, w: None)
        assert reader.key is not None
        forged = forged_state(ws_id, "job-x", "p", last_event_id="e-1")
        assert reader.record(Topics(ws_id).state("job-x"), forged) is None
        await submit(mosquitto.url, ws, "job-x", "p", agent="nobody")
        _, payload = await wait_for_message(mosquitto.url, Topics(ws_id).state("job-x"))
        assert reader.record(Topics(ws_id).state("job-x"), payload) is not None, "the genuine state verifies"


async def test_a_forged_refusal_does_not_make_submit_report_refused(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """An attacker who sees the submit's event id forges an unsigned refusal for it; the CLI waits for the real verdict."""
    import os
    import signal

    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        async with Watch(mosquitto.url, topics.events("job-f")) as events:
            os.kill(projector.pid, signal.SIGSTOP)
            try:
                async with anyio.create_task_group() as tg:
                    result: dict = {}

                    async def submit_it() -> None:
                        result["done"] = await run(
                            mam(
                                "submit",
                                "--prompt",
                                "p",
                                "--agent",
                                "a",
                                "--job-id",
                                "job-f",
                                "--broker",
                                mosquitto.url,
                                "--workspace",
                                str(ws.root),
                            ),
                            cwd=ws.elsewhere,
                        )

                    tg.start_soon(submit_it)
                    event_id = json.loads((await events.next())[1])["id"]
                    forged = {
                        "received_at": "x",
                        "topic": topics.events("job-f"),
                        "reason": "forged",
                        "job_id": "job-f",
                        "event_id": event_id,
                        "payload": "",
                        "payload_bytes": 0,
                    }
                    await publish(mosquitto.url, topics.rejected, json.dumps(forged).encode())
                    os.kill(projector.pid, signal.SIGCONT)
            finally:
                os.kill(projector.pid, signal.SIGCONT)
    done = result["done"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "job-f"
    assert "ignoring" in done.stderr.decode() and "forged" not in done.stderr.decode()
