"""`mam show JOB`'s view of what a real run rarely gives in a test's time: a worktree job's branch and diffstat,
usage, denied tool calls, a waiting question, a blocked job, what the job asked for, lost output, a long result;
colour only on a terminal without NO_COLOR / --no-color; a damaged record in one line; hostile text escaped.

The jobs are audit logs and records written as the projector writes them (`logged_job`); `mam show` runs as a
subprocess. Only finished or waiting jobs here: the view of a queued job asks a broker (test_show_describe.py)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_forms_support import logged_job

from mam.cli.describe import Related, describe
from mam.contract import events as ev
from mam.contract.record import JobRecord, Status

from support import child_env, mam, run
from workspace_support import WorkspacePaths

AT = "2026-03-01T09:00:00"


def _sections(text: str) -> dict[str, list[str]]:
    """Each `Label:` of the view with its value's lines (continuations without their indent)."""
    found: dict[str, list[str]] = {}
    label = ""
    for line in text.splitlines():
        if line[:1].isupper() and ":" in line[:14]:
            label, value = line.split(":", 1)
            found[label] = [value.strip()]
        elif line.startswith(" " * 14) and label:
            found[label].append(line.strip())
    return found


async def _show(ws: WorkspacePaths, job: str, *more: str) -> str:
    done = await run(mam("show", job, "--workspace", str(ws.root), *more), cwd=ws.elsewhere)
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    return done.stdout.decode()


def _ran(job: str, *events: ev.AnyEvent, submitted: ev.Submitted | None = None) -> tuple[ev.AnyEvent, ...]:
    return (
        submitted or ev.Submitted(prompt=f"do {job}", agent="claude-code"),
        ev.Claimed(runner="r1"),
        ev.Started(runner="r1", counts_outputs=True),
        *events,
    )


async def test_show_says_git_usage_denials_and_what_the_job_asked_for(ws: WorkspacePaths) -> None:
    asked = ev.Submitted(
        prompt="write the notes\nthen stop",
        agent="claude-code",
        labels={"team": "core"},
        require={"gpu": "a100"},
        priority=5,
        permissions="read-only",
        model="sonnet",
        max_turns=3,
        budget_usd=0.5,
        timeout=600,
        agent_session="s1",
        role="writer",
        git=ev.GitInfo(commit="abc1234", branch="main", dirty=True),
    )
    finish = ev.GitInfo(commit="def5678", branch="mam/wt", base="abc1234", files_changed=2, insertions=3, deletions=1)
    usage = ev.Usage(cost_usd=0.0123, input_tokens=2312, cached_input_tokens=1000, output_tokens=411, turns=3)
    logged_job(
        ws,
        "wt",
        AT,
        *_ran(
            "wt",
            ev.Output(text="writing\n", seq=0),
            ev.Succeeded(
                result="all done", git=finish, usage=usage, denials=["Write /w/x.md", "Bash rm -rf /"], outputs=1
            ),
            submitted=asked,
        ),
    )
    text = await _show(ws, "wt")
    said = _sections(text)
    assert said["Status"] == ["succeeded  (2 tool calls denied at its permission level)"]
    assert said["Session"] == ["s1 (role writer)"] and said["Prompt"] == ["write the notes", "then stop"]
    assert (said["Labels"], said["Requires"], said["Priority"]) == (["team=core"], ["gpu=a100"], ["5"])
    assert (said["Permissions"], said["Model"]) == (["read-only"], ["sonnet"])
    assert said["Limits"] == ["runs at most 10m; at most 3 turns; budget $0.50"]
    assert said["Denied"] == ["Write /w/x.md", "Bash rm -rf /"]
    assert said["Usage"] == ["$0.0123, 2,312 input tokens (1,000 cached), 411 output tokens, 3 turns"]
    assert said["Git"] == [
        "at submit: abc1234 on main, with uncommitted changes",
        "branch mam/wt: 2 files changed, 3 insertions(+), 1 deletion(-)",
        "review: git diff abc1234..def5678",
        "land: mam merge wt (or --squash), or mam discard wt; mam diff wt shows it",
    ]
    assert said["Output"] == ["1 line (mam logs wt prints it)"] and text.endswith("\n  writing\n")
    assert "usage" not in text and "git_at" not in text and "{" not in text


async def test_show_says_why_a_job_waits_and_how_to_answer_it(ws: WorkspacePaths) -> None:
    logged_job(ws, "asks", AT, *_ran("asks", ev.InputRequested(question="Deploy now?", choices=["yes", "no"])))
    logged_job(ws, "first", AT, *_ran("first"))
    logged_job(ws, "then", AT, ev.Submitted(prompt="after it", agent="shell", after=["first", "gone"]))
    asks = _sections(await _show(ws, "asks"))
    assert asks["Status"] == ["waiting"] and asks["Reason"] == [
        "waits for a person to answer its question: mam answer asks TEXT"
    ]
    assert asks["Question"] == ["Deploy now?  (choices: yes, no)"] and asks["Output"] == ["none yet"]
    assert "running for" in asks["Started"][0] and "Finished" not in asks
    then = _sections(await _show(ws, "then"))
    assert then["Status"] == ["blocked"]
    assert then["Reason"] == ["waits for first (running), gone (not found) to succeed (--after)"]


async def test_show_says_lost_output_and_cuts_a_long_result_with_the_way_to_all_of_it(ws: WorkspacePaths) -> None:
    result = "".join(f"finding {n}\n" for n in range(1, 31))
    logged_job(
        ws,
        "gaps",
        AT,
        *_ran(
            "gaps",
            ev.Output(text="one\n", seq=0),
            ev.Output(text="three\n", seq=2),
            ev.Succeeded(result=result, outputs=3),
        ),
    )
    text = await _show(ws, "gaps")
    said = _sections(text)
    assert said["Result"] == [
        *(f"finding {n}" for n in range(1, 21)),
        "... 10 more lines: mam show gaps -o json has all of it",
    ]
    assert said["Output"] == [
        "2 lines (mam logs gaps prints it)",
        "output incomplete: 1 of 3 output events missing (seq 1)",
    ]
    assert text.endswith("\n  one\n  three\n") and "outputs_missing" not in text
    full = await _show(ws, "gaps", "-o", "json")
    assert json.loads(full)["result"] == result and json.loads(full)["outputs_missing"] == [[1, 1]]


async def test_show_colours_the_status_only_on_a_terminal_and_never_with_no_color(ws: WorkspacePaths) -> None:
    logged_job(ws, "red", AT, *_ran("red", ev.Failed(exit_code=2, error="broke")))
    seen = {}
    for name, flags, env in (("tty", (), {}), ("flag", ("--no-color",), {}), ("env", (), {"NO_COLOR": "1"})):
        master, slave = pty.openpty()
        try:
            done = subprocess.run(
                mam("show", "red", "--workspace", str(ws.root), *flags),
                cwd=ws.elsewhere,
                stdout=slave,
                stderr=subprocess.PIPE,
                env=child_env(**env),
                timeout=30,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            os.close(slave)
            slave = -1
            seen[name] = _read_all(master)
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)
    assert "\x1b[31;1mfailed\x1b[0m" in seen["tty"], seen["tty"]
    for name in ("flag", "env"):
        assert "\x1b[" not in seen[name] and "Status:       failed" in seen[name], (name, seen[name])


def _read_all(fd: int) -> str:
    """What a finished child wrote to a pty (its end closed: the read ends with EIO)."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.decode().replace("\r\n", "\n")


async def test_a_damaged_record_is_one_line_naming_mam_rebuild(ws: WorkspacePaths) -> None:
    logged_job(ws, "broken", AT, *_ran("broken"))
    (ws.jobs / "broken.json").write_bytes(b'{"job_id": "broken", "status": ')
    done = await run(mam("show", "broken", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    err = done.stderr.decode()
    assert done.returncode == 1 and done.stdout == b"" and err.count("\n") == 1, err
    assert "broken.json is damaged" in err and "run `mam rebuild`" in err and "Traceback" not in err


HOSTILE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
"""Any text a client may send: control characters, bidi overrides, line separators, NULs."""
RAW = set(
    map(
        chr,
        [
            *range(0x00, 0x09),
            *range(0x0B, 0x20),
            *range(0x7F, 0xA0),
            0x061C,
            0x200E,
            0x200F,
            *range(0x2028, 0x202F),
            *range(0x2066, 0x206A),
        ],
    )
)


@pytest.mark.fast
@settings(max_examples=200, deadline=None)
@given(
    prompt=HOSTILE, result=HOSTILE, error=HOSTILE, label=HOSTILE, session=HOSTILE, output=st.lists(HOSTILE, max_size=3)
)
def test_the_view_prints_no_raw_control_character_of_what_a_client_sent(
    prompt: str, result: str, error: str, label: str, session: str, output: list[str]
) -> None:
    record = JobRecord(
        job_id="j",
        workspace="w",
        status=Status.FAILED,
        agent="a",
        prompt=prompt,
        result=result,
        error=error,
        labels={label: label},
        agent_session=session,
        submitted_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
        exit_code=1,
        denials=[error],
        git_at_submit=ev.GitInfo(commit="abc1234", branch=label),
        parent="p",
    )
    children = [msgspec.structs.replace(record, job_id="k", agent=label, prompt=prompt, status=Status.RUNNING)]
    lines = describe(
        record,
        Related(output=output, output_lines=len(output), children=children, children_total=1, parent=label),
        datetime(2026, 1, 2, tzinfo=UTC),
    )
    text = "\n".join(lines)
    assert not RAW & set(text), [line for line in lines if RAW & set(line)]
    assert all("\n" not in line for line in lines)
