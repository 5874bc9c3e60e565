"""End to end over real sockets: real brokers, `mam-projector` and `mam submit` as processes."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


def only_workspace_files(ws: WorkspacePaths) -> None:
    assert not list(ws.elsewhere.iterdir()), "nothing may land in the caller's cwd"
    assert sorted(p.name for p in ws.root.iterdir()) == [".mam"]
    assert sorted(p.name for p in (ws.root / ".mam").iterdir()) == [
        ".gitignore",
        "delegate_job_logs",
        "jobs",
        "projector.key",
        "projector.pub",
    ]


@pytest.mark.parametrize("via", ["env", "flag"])
async def test_submit_from_other_cwd_lands_in_workspace_root(
    broker: RunningBroker, ws: WorkspacePaths, via: str
) -> None:
    async with projector_process(broker, ws.root, ws.elsewhere, via=via):
        args = [
            "submit",
            "--prompt",
            "write the tests",
            "--agent",
            "claude-code",
            "--agent-session",
            "herdr:demo",
            "--role",
            "tester",
            "--label",
            "team=core",
            "--job-id",
            "job-1",
            "--wait",
            "--json",
            "--broker",
            broker.url,
        ]
        if via == "env":
            result = await run(mam(*args), cwd=ws.elsewhere, env=child_env(WORKSPACE_ROOT=str(ws.root)))
        else:
            result = await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert result.returncode == 0, result.stderr.decode()
        recorded = json.loads(result.stdout)
        assert recorded["status"] == "submitted" and recorded["version"] == 1

        record = json.loads((ws.jobs / "job-1.json").read_bytes())
        assert record == recorded
        assert record["workspace"] == workspace_id(ws.root)
        assert (record["agent"], record["agent_session"], record["role"]) == ("claude-code", "herdr:demo", "tester")
        assert record["labels"] == {"team": "core"}
        log = [json.loads(line) for line in (ws.logs / "job-1" / "events.jsonl").read_text().splitlines()]
        assert [e["event"]["type"] for e in log] == ["submitted"] and log[0]["seq"] == 1
        meta = json.loads((ws.logs / "job-1" / "meta.json").read_bytes())
        assert meta["prompt"] == "write the tests" and meta["event_id"] == record["last_event_id"]

        state = await wait_for_state(broker.url, workspace_id(ws.root), "job-1")
        assert state.pop("signature"), "the retained state is the record, signed by the projector"
        assert state == record
    only_workspace_files(ws)


async def test_submit_without_wait_prints_the_id_and_is_recorded(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        result = await run(
            mam("submit", "--prompt", "-", "--agent", "codex", "--broker", amqtt.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            input=b"prompt from stdin\n",
        )
        assert result.returncode == 0, result.stderr.decode()
        job_id = result.stdout.decode().strip()
        assert job_id.startswith("job-")
        state = await wait_for_state(amqtt.url, workspace_id(ws.root), job_id)
        assert state["prompt"] == "prompt from stdin\n" and state["agent"] == "codex"


async def test_mosquitto_clients_submit_and_read_state(broker: RunningBroker, ws: WorkspacePaths) -> None:
    """The README's example: any MQTT client can submit and follow a job."""
    pub, sub = shutil.which("mosquitto_pub"), shutil.which("mosquitto_sub")
    if not (pub and sub):
        pytest.fail("mosquitto_pub/mosquitto_sub are required (apt-get install mosquitto-clients)")
    ws_id = workspace_id(ws.root)
    async with projector_process(broker, ws.root, ws.elsewhere):
        payload = '{"type":"submitted","prompt":"hello","agent":"claude-code","agent_session":"herdr:demo"}'
        published = await run(
            [
                pub,
                "-p",
                str(broker.port),
                "-h",
                "127.0.0.1",
                "-t",
                f"mam/{ws_id}/jobs/job-1/events",
                "-q",
                "1",
                "-m",
                payload,
            ],
            cwd=ws.elsewhere,
        )
        assert published.returncode == 0, published.stderr
        await wait_for_state(broker.url, ws_id, "job-1")
        got = await run(
            [sub, "-p", str(broker.port), "-h", "127.0.0.1", "-t", f"mam/{ws_id}/jobs/+/state", "-C", "1", "-W", "10"],
            cwd=ws.elsewhere,
        )
        assert got.returncode == 0, got.stderr
        record = json.loads(got.stdout)
        assert (record["job_id"], record["status"], record["agent_session"]) == ("job-1", "submitted", "herdr:demo")
        assert record["last_event_id"].startswith("p-"), "a hand-published event gets an id from the projector"
        assert record.pop("signature"), "the retained state is the record, signed by the projector"
        assert json.loads((ws.jobs / "job-1.json").read_bytes()) == record


async def test_reading_commands_show_what_the_projector_wrote(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        for job in ("job-a", "job-b"):
            result = await run(
                mam(
                    "submit",
                    "--prompt",
                    f"do {job}",
                    "--agent",
                    "aider",
                    "--job-id",
                    job,
                    "--wait",
                    "--broker",
                    amqtt.url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            assert result.returncode == 0, result.stderr.decode()
    env = child_env(WORKSPACE_ROOT=str(ws.root))
    jobs = await run(mam("jobs", "--json"), cwd=ws.elsewhere, env=env)
    assert [j["job_id"] for j in json.loads(jobs.stdout)] == ["job-b", "job-a"], "newest first"
    table = await run(mam("jobs", "--status", "submitted"), cwd=ws.elsewhere, env=env)
    assert table.stdout.decode().splitlines()[0].split()[:2] == ["JOB", "STATUS"] and b"job-b" in table.stdout
    show = await run(mam("show", "job-a", "--json"), cwd=ws.elsewhere, env=env)
    assert json.loads(show.stdout)["prompt"] == "do job-a"
    events = await run(mam("events", "job-a", "--json"), cwd=ws.elsewhere, env=env)
    assert [e["event"]["type"] for e in json.loads(events.stdout)] == ["submitted"]
    info = await run(mam("workspace", "--json"), cwd=ws.elsewhere, env=env)
    described = json.loads(info.stdout)
    assert described["root"] == str(ws.root) and described["id"] == workspace_id(ws.root)
    assert described["registry_dir"] == str(ws.jobs) and described["logs_dir"] == str(ws.logs)
    missing = await run(mam("show", "nope"), cwd=ws.elsewhere, env=env)
    assert missing.returncode == 1 and b"no job 'nope'" in missing.stderr and b"Traceback" not in missing.stderr
    hostile = await run(mam("show", "../x"), cwd=ws.elsewhere, env=env)
    assert hostile.returncode == 2 and b"invalid job id" in hostile.stderr


async def test_submit_wait_without_projector_fails_without_publishing(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    result = await run(
        mam("submit", "--prompt", "x", "--agent", "a", "--wait", "--broker", amqtt.url, "--workspace", str(ws.root)),
        cwd=ws.elsewhere,
    )
    assert result.returncode == 3
    err = result.stderr.decode()
    assert "no projector is online" in err and "mam up" in err and "Traceback" not in err
    assert err.count("\n") == 1


async def test_unreachable_broker_is_one_line_and_exit_3(ws: WorkspacePaths) -> None:
    from brokers import free_port

    url = f"mqtt://127.0.0.1:{free_port()}"
    result = await run(
        mam("submit", "--prompt", "x", "--agent", "a", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
    )
    assert result.returncode == 3
    assert b"cannot reach the MQTT broker" in result.stderr and b"Traceback" not in result.stderr
    projector = await run([mam()[0] + "-projector", "--broker", url, "--workspace", str(ws.root)], cwd=ws.elsewhere)
    assert projector.returncode == 3 and b"cannot reach the MQTT broker" in projector.stderr


async def test_bad_arguments_are_usage_errors(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    for args in (["--label", "novalue"], ["--job-id", "../x"], ["--broker", "http://x"], ["--agent", "bad/name"]):
        base = ["submit", "--prompt", "x", "--agent", "a", "--workspace", str(ws.root), "--broker", amqtt.url]
        result = await run(mam(*base, *args), cwd=ws.elsewhere)
        assert result.returncode == 2, (args, result.stderr)
        assert b"Traceback" not in result.stderr and result.stderr.count(b"\n") == 1


def test_import_agents_does_not_resolve_to_mam(tmp_path: object) -> None:
    from support import BIN

    code = "import importlib.util, mam.agents; print(importlib.util.find_spec('agents'))"
    out = subprocess.run([str(BIN / "python"), "-c", code], capture_output=True, check=True, cwd="/")
    assert out.stdout.strip() == b"None"


async def test_python_api_submit_records_git_provenance(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    git = ["git", "-C", str(ws.root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    from mam.agents import Publisher
    from mam.contract.broker_url import parse_broker_url
    from mam.contract.workspace import resolve

    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(amqtt.url)) as pub:
            record = await pub.submit(prompt="p", agent="a", wait=True)
    assert record.git_at_submit is not None  # type: ignore[union-attr]
    assert (record.git_at_submit.commit, record.git_at_submit.branch) == (head, "main")  # type: ignore[union-attr]


async def test_python_api_submit_takes_a_retry_policy_and_dependencies(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    from mam.agents import Publisher
    from mam.contract.broker_url import parse_broker_url
    from mam.contract.workspace import resolve

    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(amqtt.url)) as pub:
            first = await pub.submit(prompt="p", agent="a", job_id="job-first", wait=True)
            then = await pub.submit(
                prompt="q",
                agent="a",
                job_id="job-then",
                wait=True,
                retries=3,
                retry_on=["lost"],
                backoff=2.0,
                after=["job-first"],
            )
    assert first.status.value == "submitted"  # type: ignore[union-attr]
    assert then.status.value == "blocked" and then.after == ["job-first"]  # type: ignore[union-attr]
    assert (then.retries, then.retry_on, then.backoff) == (3, ["lost"], 2.0)  # type: ignore[union-attr]
