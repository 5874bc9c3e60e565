"""`mam show JOB` as `kubectl describe` reads (issue 43, part 4): real `mam up`, a real `mam-agent` running shell
jobs into every state a person asks about, and the `mam show` a person types, as a subprocess.

The view says the status and why (the reason a queued job waits, a failure's error, a signal by its name, a
cancel's reason), agent, runner, times in one local form, the outcome, the result, the delegation tree and the
last ten lines of the output with the way to see all of it; the plumbing (`version`, `runner_epoch`, ...) is in
`-o json` only, byte for byte the record it always printed."""

from __future__ import annotations

import json
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from runner_support import agent_runner, submit

from e2e import up_with_flags, workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

PLUMBING = (
    "version",
    "last_event_id",
    "runner_epoch",
    "output_seqs",
    "outputs_expected",
    "runner_key",
    "last_seen_at",
    "updated_at",
    "claimed_at",
    "output_bytes",
)
"""Record keys a person has no use for: `-o json` has them, the view never names them."""
ENDED = {"succeeded", "failed", "cancelled", "timed_out", "lost"}
LOCAL = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z+\-0-9]+")


def sections(text: str) -> dict[str, str]:
    """Each `Label:` of the view and the rest of its first line."""
    return {m[1]: m[2] for m in re.finditer(r"^([A-Z][A-Za-z ]*):\s+(.*)$", text, re.MULTILINE)}


async def show(ws: WorkspacePaths, url: str, job: str, *more: str, **env: str | None) -> str:
    done = await run(
        mam("show", job, "--broker", url, "--workspace", str(ws.root), *more), cwd=ws.elsewhere, env=child_env(**env)
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    return done.stdout.decode()


@pytest.mark.timeout(120)
async def test_show_describes_jobs_in_every_state_and_keeps_the_plumbing_for_json(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _), agent_runner(f"mqtt://127.0.0.1:{port}", ws, agent="shell"):
        url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
        await submit(url, ws, "ok", 'for i in $(seq 1 15); do echo "line $i"; done', agent="shell")
        await submit(url, ws, "bad", "echo oops >&2; exit 3", agent="shell")
        await submit(url, ws, "slow", "echo start; sleep 30", "--job-timeout", "1", agent="shell")
        await submit(url, ws, "killed", "kill -TERM $$", agent="shell")
        await submit(url, ws, "stop", "echo begun; sleep 30", agent="shell")
        await wait_for_state(url, ws_id, "stop", lambda r: r["status"] == "running" and r["output_bytes"] > 0)
        cancel = await run(mam("cancel", "stop", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert cancel.returncode == 0, cancel.stderr
        await submit(url, ws, "queued", "echo never", agent="nobody")
        await submit(url, ws, "kid-ran", "echo child", "--parent", "queued", agent="shell")
        await submit(url, ws, "kid-waits", "echo later", "--parent", "queued", agent="nobody")
        for job in ("ok", "bad", "slow", "killed", "stop", "kid-ran"):
            await wait_for_state(url, ws_id, job, lambda r: r["status"] in ENDED, timeout=30)
        shown = {
            job: await show(ws, url, job)
            for job in ("ok", "bad", "slow", "killed", "stop", "queued", "kid-ran", "kid-waits")
        }
        as_json = {job: await show(ws, url, job, "-o", "json") for job in shown}
        in_india = await show(ws, url, "ok", TZ="Asia/Kolkata")

    for job, text in shown.items():
        record = json.loads((ws.jobs / f"{job}.json").read_bytes())
        assert as_json[job] == json.dumps(record, indent=2) + "\n", "-o json prints the record as it always did"
        named = sections(text)
        assert named["Job"] == job and named["Status"].split()[0] == record["status"], text
        assert named["Agent"] == record["agent"] and named["Prompt"] == record["prompt"], text
        assert not [key for key in PLUMBING if key in text], (job, text)
        for value in (record.get("runner_key"), record.get("runner_epoch"), record["last_event_id"]):
            assert not value or value not in text, (job, value)
        assert {key for key in PLUMBING if key in record} <= set(json.loads(as_json[job])), job
        times = [named[label] for label in ("Submitted", "Started", "Finished") if label in named]
        assert times and all(LOCAL.match(t) for t in times), times
        assert not re.search(r"\d\dT\d\d:\d\d", text), f"an ISO time, not the one local form: {text}"
        assert "-15" not in text, "a signal reads as the signal"

    ok = sections(shown["ok"])
    assert ok["Runner"] == "r1" and ok["Exit"] == "code 0" and "Reason" not in ok
    assert ok["Output"] == "the last 10 of 15 lines (all of it: mam logs ok)"
    tail = shown["ok"].splitlines()[-10:]
    assert tail == [f"  line {n}" for n in range(6, 16)], shown["ok"]
    assert ok["Result"] == "line 1" and "ran " in ok["Finished"] and "ago" in ok["Finished"]

    bad = sections(shown["bad"])
    assert (bad["Reason"], bad["Exit"]) == ("oops", "code 3") and bad["Output"].startswith("1 line")
    assert shown["bad"].rstrip().endswith("\n  oops")

    slow = sections(shown["slow"])
    assert slow["Reason"] == "timed out after 1s" and slow["Exit"] == "killed by SIGTERM (signal 15)"
    assert slow["Limits"] == "runs at most 1s" and shown["slow"].rstrip().endswith("\n  start")

    killed = sections(shown["killed"])
    assert killed["Reason"] == "killed by SIGTERM (signal 15)" and "Exit" not in killed, shown["killed"]
    assert killed["Output"] == "none"

    assert sections(shown["stop"])["Reason"] == "cancelled on request"

    queued = sections(shown["queued"])
    assert queued["Reason"].startswith("queued: no runner for 'nobody' is online"), shown["queued"]
    assert not {"Runner", "Started", "Finished", "Output", "Exit"} & set(queued)
    assert queued["Children"] == "2 (the whole tree: mam jobs tree queued)"
    rows = [line.split() for line in shown["queued"].splitlines() if line.startswith("  kid-")]
    assert rows == [
        ["kid-ran", "succeeded", "shell", "echo", "child"],
        ["kid-waits", "submitted", "nobody", "echo", "later"],
    ]
    assert sections(shown["kid-ran"])["Parent"] == "queued (submitted)"
    assert sections(shown["kid-waits"])["Reason"].startswith("queued: no runner for 'nobody' is online")
    assert "\x1b[" not in "".join(shown.values()), "no colour when piped"

    submitted = datetime.fromisoformat(json.loads(as_json["ok"])["submitted_at"].replace("Z", "+00:00"))
    there = submitted.astimezone(ZoneInfo("Asia/Kolkata"))
    assert sections(in_india)["Submitted"].startswith(there.strftime("%Y-%m-%d %H:%M:%S IST (")), in_india
