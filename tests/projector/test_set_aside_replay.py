"""Nothing set aside is forgotten (issue 42, part 3): each start tries a message set aside again, `mam set-aside`
lists them and replays one or all, and while any remain `projector/status` and `mam doctor` say how many and why.

The documented hook `MAM_TEST_FAIL=fold:TEXT` (projector/faults.py) stands in for a transient fault: a projector
started without it is one whose fault cleared.
"""

from __future__ import annotations

import json

import pytest
from set_aside_support import HOOK, POISON, REASON, lines, online

from brokers import RunningBroker
from e2e import workspace_id
from support import Daemon, Watch, child_env, mam, publish, run
from workspace_support import WorkspacePaths


async def _mam(ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    done = await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=60)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _set_aside_by_the_hook(broker: RunningBroker, ws: WorkspacePaths) -> str:
    """POISON published to a projector that fails on it: set aside (its status says so); the entry's id."""
    ws_id = workspace_id(ws.root)
    async with Watch(broker.url, f"mam/{ws_id}/projector/status") as status, online(broker, ws, HOOK):
        await publish(broker.url, f"mam/{ws_id}/jobs/poison-1/events", POISON)
        await status.json(lambda s: s.get("set_aside") == 1)
    [entry] = lines(ws.logs / "_set_aside.jsonl")
    return str(entry["id"])


def _events(ws: WorkspacePaths, job_id: str) -> list[str]:
    return [json.loads(line)["event"]["id"] for line in (ws.logs / job_id / "events.jsonl").read_text().splitlines()]


def _check(report: dict, name: str) -> dict:
    return next(check for check in report["checks"] if check["name"] == name)


@pytest.mark.slow  # 6-7 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
@pytest.mark.timeout(120)
async def test_a_fault_cleared_by_the_next_start_loses_nothing_and_each_face_says_what_is_set_aside_meanwhile(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    key = await _set_aside_by_the_hook(mosquitto, ws)
    # No projector runs now: the file says it, to `mam set-aside` and `mam doctor`.
    code, out, err = await _mam(ws, "set-aside")
    assert code == 0 and out.splitlines()[0].split() == [
        "ID",
        "SET",
        "ASIDE",
        "AT",
        "JOB",
        "BYTES",
        "TRIED",
        "AGAIN",
        "REASON",
    ]
    [row] = out.splitlines()[1:]
    assert row.startswith(key[:12]) and " poison-1 " in row and row.endswith(REASON), out
    assert f"1 message(s) set aside (a projector fault, not a refusal): {REASON}" in err
    code, out, _ = await _mam(ws, "set-aside", "-o", "json")
    [listed] = json.loads(out)
    assert listed["id"] == key and listed["topic"] == f"mam/{ws_id}/jobs/poison-1/events" and listed["reason"] == REASON
    code, out, _ = await _mam(ws, "doctor", "--json", "--broker", mosquitto.url)
    check = _check(json.loads(out), "workspace.set_aside")
    assert check["status"] == "warn" and check["detail"].startswith(
        f"1 message(s) set aside (a projector fault, not a refusal): {REASON}; in "
    ), check
    assert check["fix"].startswith("once the cause is fixed: mam set-aside --replay --all"), check
    # The fault cleared (no hook): the next start tries it again and records it; nothing is set aside any more.
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status, online(mosquitto, ws) as projector:
        first = await status.json(lambda s: s["status"] == "online" and s["pid"] == projector.pid)
        assert first["set_aside"] == 1, "said from the file at connect, before it is tried again"
        said = await status.json(lambda s: s["pid"] == projector.pid and not s.get("set_aside"))
        assert said["status"] == "online" and said["set_aside_reasons"] is None and said["detail"] is None
        assert json.loads((ws.jobs / "poison-1.json").read_bytes())["status"] == "submitted"
    assert lines(ws.logs / "_set_aside.jsonl") == [] and _events(ws, "poison-1") == ["poison-1"]
    assert "trying again 1 message(s) set aside" in projector.output()
    assert "is handled now; 0 remain set aside" in projector.output()
    async with online(mosquitto, ws):  # one more start: nothing to try, nothing recorded twice
        pass
    assert _events(ws, "poison-1") == ["poison-1"]
    code, out, _ = await _mam(ws, "set-aside")
    assert (code, out) == (0, "nothing set aside\n")
    code, out, _ = await _mam(ws, "doctor", "--json", "--broker", mosquitto.url)
    assert _check(json.loads(out), "workspace.set_aside") == {
        "name": "workspace.set_aside",
        "status": "ok",
        "detail": "no message set aside",
        "fix": None,
    }


@pytest.mark.timeout(120)
async def test_mam_set_aside_replay_says_a_message_still_fails_and_one_replayed_while_the_projector_is_away_is_recorded_once(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    for args, said in (
        (["--all"], "--all goes with --replay"),
        (["--replay"], "--replay needs the ids"),
        (["--replay", "abcdef0123"], "no message set aside has id 'abcdef0123'"),
        (["--replay", "abc"], "id 'abc' is too short"),
    ):
        code, _, err = await _mam(ws, "set-aside", *args)
        assert code == 2 and said in err, (args, err)
    key = await _set_aside_by_the_hook(mosquitto, ws)
    # The fault is still there: replayed, it fails once more and keeps its one line.
    async with online(mosquitto, ws, HOOK) as projector:
        code, out, err = await _mam(ws, "set-aside", "--replay", key[:8], "--broker", mosquitto.url)
        assert code == 1, err
        assert out == f"{key[:12]}  poison-1  still set aside: {REASON}\n"
    [entry] = lines(ws.logs / "_set_aside.jsonl")
    assert entry["tried_again"] == 2 and entry["id"] == key, "at the start, then by the replay: still one line"
    assert "attempt 1 of 3" not in projector.output().split("trying again 1 message(s) set aside")[-1]
    # Replayed while no projector runs: the broker keeps it for the projector's session; the next start (its fault
    # cleared) records the message from the file, then takes the broker's copy as a duplicate by its event id.
    command = mam(
        "set-aside", "--replay", "--all", "--timeout", "60", "--broker", mosquitto.url, "--workspace", str(ws.root)
    )
    async with Watch(mosquitto.url, f"mam/{ws_id}/jobs/poison-1/events") as events:
        replay = Daemon(command, cwd=ws.elsewhere, env=child_env(), log=ws.root.parent / "replay.log")
        await events.next()  # the replay's publish: in the broker now
    try:
        async with online(mosquitto, ws) as projector:
            assert await replay.wait(60) == 0, replay.output()
    finally:
        replay.stop()
    assert replay.output() == f"{key[:12]}  poison-1  handled\n"
    assert _events(ws, "poison-1") == ["poison-1"], "recorded once"
    assert lines(ws.logs / "_set_aside.jsonl") == []
    assert "1 duplicates" in projector.output().splitlines()[-1], projector.output()
