"""A job's credentials (issue 29): under `mam up` with a password file a runner hands its job a login of
the job's own, `job:<id>` with a token it signed, never its own password. The job delegates and asks with
it; anything else it publishes is refused with a reason; once the job ends the login is refused at connect
and its open connections are closed.

The real thing end to end: `mam up --password-file`, `mam-agent --profile shell` started with the
password in its own `MAM_BROKER_URL`, a shell job that prints its environment, submits a child and asks a
question with `mam`, and a test client holding the job's token.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import aiomqtt
import anyio
import pytest
from access_support import make_user
from runner_support import agent_runner, log_events, submit

from mam.client.inbox import messages
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url
from mam.contract.topics import Topics

from e2e import event, up_with_flags, workspace_id
from support import BIN, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

SECRET = "runner-secret-pw-29"
"""The runner's broker password: it must appear nowhere a job can see or leave it."""


def _script(signals: Path) -> str:
    """The job: its environment, two children through `mam submit` (one it cancels), a question through
    `mam ask`, then its broker URL in a file and a wait until the test says go."""
    return "\n".join(
        [
            "env | sort",
            f'{BIN}/mam submit --agent nobody --prompt "a child" --job-id "$MAM_JOB_ID-child" || exit 11',
            f'{BIN}/mam submit --agent nobody --prompt "another" --job-id "$MAM_JOB_ID-child-2" || exit 11',
            f'{BIN}/mam cancel "$MAM_JOB_ID-child-2" || exit 13',
            f'a=$({BIN}/mam ask "Proceed?" --choice yes --choice no) || exit 12',
            'echo "answer: $a"',
            f'printf %s "$MAM_BROKER_URL" > {signals}/job-url',
            f"while [ ! -e {signals}/go ]; do sleep 0.05; done",
        ]
    )


def _granted(result: object) -> list[int]:
    codes = list(result) if isinstance(result, list | tuple) else [result]
    return [int(getattr(code, "value", code)) for code in codes]


async def _refusal(watch: Watch, event_id: str) -> dict:
    """The refusal on `rejected` naming `event_id` (the payload ends with the projector's signature)."""
    _, payload = await watch.next(lambda _t, p: f'"event_id":"{event_id}"'.encode() in p)
    return json.loads(payload)


async def test_a_job_gets_its_own_login_delegates_and_asks_with_it_and_nothing_more(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    passwd = await make_user(tmp_path, "alice", SECRET)
    signals = tmp_path / "signals"
    signals.mkdir()
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with up_with_flags(ws, "--password-file", str(passwd), login=f"alice:{SECRET}") as (port, up):
        url = f"mqtt://alice:{SECRET}@127.0.0.1:{port}"
        runner_env = child_env(MAM_BROKER_URL=url)  # the password in the runner's own environment too
        async with agent_runner(url, ws, "--profile", "shell", agent="shell", env=runner_env):
            await submit(url, ws, "victim", "someone else's job", agent="nobody")
            await submit(url, ws, "job-a", _script(signals), agent="shell")
            await wait_for_state(url, ws_id, "job-a", lambda r: r["status"] == "waiting", timeout=30)
            answered = await run(
                mam("answer", "job-a", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert answered.returncode == 0, answered.stderr
            with anyio.fail_after(30):
                while not (signals / "job-url").exists():
                    await anyio.sleep(0.05)  # polling for the file the job writes
            job_url = (signals / "job-url").read_text()
            login = parse_broker_url(job_url)
            assert SECRET not in job_url and login.username == "job:job-a" and login.password, job_url
            child = await wait_for_state(url, ws_id, "job-a-child")
            assert child["parent"] == "job-a" and child["status"] == "submitted", child
            cancelled = await wait_for_state(url, ws_id, "job-a-child-2")
            assert cancelled["parent"] == "job-a" and cancelled["status"] == "cancelled", cancelled

            async with (
                Watch(url, topics.rejected) as refusals,
                Watch(url, topics.events("victim")) as victim_events,
                make_client(login) as job,
            ):
                assert _granted(await job.subscribe(topics.state("job-a"), qos=1)) == [1]
                assert _granted(await job.subscribe(topics.state("job-a-child"), qos=1)) == [1]
                assert _granted(await job.subscribe(topics.all_states, qos=1)) == [0x80], "no wildcards"
                assert _granted(await job.subscribe(topics.state("victim"), qos=1)) == [0x80], "not its tree"
                forged = {
                    "claim": (topics.events("victim"), event("claimed", "e-claim", runner="job-a", epoch="x")),
                    "root": (topics.events("escape"), event("submitted", "e-root", prompt="p", agent="a")),
                    "output": (topics.events("job-a"), event("output", "e-output", text="forged", seq=99)),
                    "cancel": (topics.events("victim"), event("cancel_requested", "e-cancel")),
                }
                for topic, payload in forged.values():
                    await job.publish(topic, payload, qos=1)
                reasons = {name: (await _refusal(refusals, f"e-{name}"))["reason"] for name in forged}
                await publish(url, topics.events("victim"), b'{"type":"bogus","id":"e-marker"}')
                _, first = await victim_events.next()
                assert b"e-marker" in first, f"a refused publish was delivered: {first!r}"
            assert "may not publish claimed" in reasons["claim"], reasons
            assert "submits only its own children: parent must be job-a, not none" in reasons["root"], reasons
            assert "may not publish output" in reasons["output"], reasons
            assert "cancels only job job-a and the jobs under it, not victim" in reasons["cancel"], reasons
            victim = await wait_for_state(url, ws_id, "victim")
            assert victim["status"] == "submitted" and victim["version"] == 1, victim
            assert not (ws.jobs / "escape.json").exists()

            async with make_client(login) as held:
                await held.subscribe(topics.state("job-a"), qos=1)
                (signals / "go").touch()
                done = await wait_for_state(url, ws_id, "job-a", lambda r: r["status"] == "succeeded", timeout=30)
                with anyio.fail_after(15), pytest.raises(aiomqtt.MqttError):
                    async for _ in messages(held):
                        pass  # the broker closes a job's connections when the job ends
            with pytest.raises(aiomqtt.MqttError, match="(?i)not authori|bad user name or password"):
                async with make_client(login):
                    pass
    output = "".join(e.get("text", "") for e in log_events(ws, "job-a") if e["type"] == "output")
    assert f"MAM_BROKER_URL=mqtt://job%3Ajob-a:{login.password}@127.0.0.1:{port}" in output, output
    assert "answer: yes" in output and done["exit_code"] == 0
    leaked = subprocess.run(["grep", "-rl", SECRET, str(ws.logs), str(ws.jobs)], capture_output=True, text=True)
    assert leaked.stdout == "", f"the runner's password is in {leaked.stdout}"
    assert "refused the login of job:job-a" in up.output() and "refused a publish of job:job-a" in up.output()
