"""Names that cannot hurt: no job, agent or workspace id may start with '.', '_' or '-'.

Such names are the projector's own files (`_rejected.jsonl`, `.projector.lock`,
`.projector.dirty`, `.<record>.tmp`) or read as options (`--help`). Before,
`_rejected.jsonl` was a legal job id: its event crashed the projector, and on
mosquitto the redelivered event crashed it again at every restart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.contract.errors import InvalidId
from mam.contract.ids import is_job_id, validate_agent_id, validate_job_id, validate_workspace_id
from mam.contract.topics import Topics
from mam.contract.workspace import derive_workspace_id
from mam.projector.audit_log import EVENTS_FILE, META_FILE, REJECTED_FILE
from mam.projector.repair import DIRTY_NAME
from mam.registry.discovery import LOCK_NAME

from brokers import RunningBroker, free_port
from e2e import projector_process, submit, up_process, workspace_id, write_job
from support import Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

POISON = ["_rejected.jsonl", "_x", "-x", "--help", ".projector.lock", ".projector.dirty", "_", "-"]


@pytest.mark.fast
@pytest.mark.parametrize("bad", POISON)
def test_ids_starting_with_dot_underscore_or_dash_are_refused(bad: str) -> None:
    for validate in (validate_job_id, validate_agent_id, validate_workspace_id):
        with pytest.raises(InvalidId, match="starting with a letter or digit"):
            validate(bad)


@pytest.mark.fast
def test_no_legal_job_id_names_a_file_of_the_projector() -> None:
    for name in (REJECTED_FILE, LOCK_NAME, DIRTY_NAME, ".job-1.json.tmp", f".{META_FILE}.tmp"):
        assert not is_job_id(name), name
    # A job's own names inside its log dir cannot be another job's either.
    assert is_job_id(EVENTS_FILE) and is_job_id(META_FILE)  # legal, but they live one level down


@pytest.mark.fast
@pytest.mark.parametrize("name", ["_x", "-x", ".x", "__init__", "-_.", "___", "x_"])
def test_a_workspace_named_like_a_hidden_or_option_name_still_gets_a_legal_id(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    root.mkdir()
    ws_id = derive_workspace_id(root)
    assert validate_workspace_id(ws_id) == ws_id
    Topics(ws_id)  # and it makes topics


async def test_poison_job_ids_are_refused_and_the_projector_keeps_serving(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        await _refuse_poison_then_record_a_good_job(amqtt.url, ws_id, ["_rejected.jsonl", "-x", "_x"])
        assert projector.proc.poll() is None
    _assert_nothing_named_after_poison(ws, lines=3)


async def test_mam_up_refuses_a_job_named_like_its_refusal_log(ws: WorkspacePaths) -> None:
    port = free_port()
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port) as up:
        await _refuse_poison_then_record_a_good_job(f"mqtt://127.0.0.1:{port}", ws_id, ["_rejected.jsonl"])
        assert up.proc.poll() is None
    _assert_nothing_named_after_poison(ws, lines=1)


async def test_a_redelivered_poison_event_does_not_crash_loop_the_projector_on_mosquitto(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/_rejected.jsonl/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        pass  # its persistent session now exists: what is published while it is away waits for it
    await publish(mosquitto.url, topic, submit("_rejected.jsonl", "poison-1"))
    async with Watch(mosquitto.url, f"mam/{ws_id}/rejected") as rejected:
        async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
            refusal = await rejected.json()
            assert refusal["topic"] == topic and "topic job id refused" in refusal["reason"]
            await publish(mosquitto.url, f"mam/{ws_id}/jobs/good-1/events", submit("good-1", "g1"))
            await wait_for_state(mosquitto.url, ws_id, "good-1")
            assert projector.proc.poll() is None
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        await publish(mosquitto.url, f"mam/{ws_id}/jobs/good-2/events", submit("good-2", "g2"))
        await wait_for_state(mosquitto.url, ws_id, "good-2")
        assert projector.proc.poll() is None
    _assert_nothing_named_after_poison(ws, lines=1)  # acknowledged once refused: never redelivered


async def _refuse_poison_then_record_a_good_job(url: str, ws_id: str, jobs: list[str]) -> None:
    async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
        for job in jobs:
            topic = f"mam/{ws_id}/jobs/{job}/events"
            await publish(url, topic, submit(job, f"poison-{job}"))
            refusal = await rejected.json()
            assert refusal["topic"] == topic
            assert "topic job id refused" in refusal["reason"]
            assert "starting with a letter or digit" in refusal["reason"]
    await publish(url, f"mam/{ws_id}/jobs/good-1/events", submit("good-1", "g1"))
    await wait_for_state(url, ws_id, "good-1")


def _assert_nothing_named_after_poison(ws: WorkspacePaths, *, lines: int) -> None:
    rejected = ws.logs / REJECTED_FILE
    assert rejected.is_file(), "the refusal log is still a file"
    assert len(rejected.read_text().splitlines()) == lines
    assert all(json.loads(line)["reason"] for line in rejected.read_text().splitlines())
    assert sorted(p.name for p in ws.logs.iterdir() if p.is_dir()) == sorted(
        p.name for p in ws.logs.iterdir() if p.name.startswith("good-")
    ), "no log dir for a poison id"
    assert not [p for p in ws.jobs.glob("*.json") if not p.name.startswith("good-")], "no record for a poison id"


async def test_rebuild_keeps_records_named_before_ids_had_to_start_with_a_letter(ws: WorkspacePaths) -> None:
    """`_underscore.json` and `-dash.json` (legal names once): no job the projector can serve
    any more, but a person's data: kept byte for byte and reported, never dropped."""
    ws.jobs.mkdir(parents=True)
    ws.logs.mkdir(parents=True)
    write_job(ws, "good-1")
    legacy = {"_underscore": b'{"job_id": "_underscore"}\n', "-dash": b'{"job_id": "-dash"}\n'}
    for name, data in legacy.items():
        (ws.jobs / f"{name}.json").write_bytes(data)
    (ws.logs / "_underscore").mkdir()
    (ws.logs / "_underscore" / EVENTS_FILE).write_bytes(b"")
    for args in (("--verify",), ()):
        done = await run(mam("rebuild", "--json", *args, "--workspace", str(ws.root)), cwd=ws.root)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["kept"] == ["-dash", "_underscore"] and report["orphans"] == []
    said = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.root)
    assert "_underscore: record is not named by a legal job id (made before the rule) (kept as it is)" in (
        said.stdout.decode()
    )
    for name, data in legacy.items():
        assert (ws.jobs / f"{name}.json").read_bytes() == data
    assert (ws.jobs / "good-1.json").is_file()
