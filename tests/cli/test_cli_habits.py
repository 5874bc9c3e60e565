"""The CLI's kubectl and git habits (issue 24): global options in either position, writes that need
4 characters of an id, several jobs and selectors for cancel/retry, `mam wait`, `logs --tail
--timestamps`, `jobs -o wide`/`--sort-by`/`tree ROOT`, shell completion."""

from __future__ import annotations

import json
import re

import anyio
import msgspec
import pytest
from output_forms_support import logged_job
from runner_support import agent_runner

from mam.agents import Publisher
from mam.contract import events as ev
from mam.contract.broker_url import parse_broker_url
from mam.contract.fold import Context, Refusal, apply
from mam.contract.record import JobRecord, Status
from mam.contract.workspace import resolve

from brokers import free_port
from e2e import up_process, workspace_id, write_job
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def _mam(ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    done = await run(mam(*args), cwd=ws.elsewhere)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_global_options_work_before_or_after_the_subcommand(ws: WorkspacePaths) -> None:
    write_job(ws, "job-one")
    root = str(ws.root)
    spellings = [
        ("--workspace", root, "jobs", "--json"),
        ("jobs", "--workspace", root, "--json"),
        ("--json", "--workspace", root, "jobs"),
        ("--workspace", root, "--json", "-v", "jobs"),
    ]
    outputs = []
    for spelling in spellings:
        code, out, err = await _mam(ws, *spelling)
        assert code == 0, (spelling, err)
        outputs.append([r["job_id"] for r in json.loads(out)])
    assert outputs == [["job-one"]] * len(spellings)
    code, out, _ = await _mam(ws, "--workspace", root, "show", "one")
    assert code == 0 and "job-one" in out
    # a flag the command does not take is refused before it, as after it
    code, _, err = await _mam(ws, "--broker", "mqtt://127.0.0.1:9", "schema")
    assert code == 2 and err.strip() == "mam: error: --broker: `mam schema` does not take it"
    code, _, err = await _mam(ws, "--json", "passwd", str(ws.elsewhere / "pw"), "u")
    assert code == 2 and "--json" in err and not (ws.elsewhere / "pw").exists()
    # a broker URL of the wrong scheme is a usage error, also for a command that reads only files
    for spelling in (("jobs", "--broker", "http://foo"), ("--broker", "http://foo", "jobs")):
        code, out, err = await _mam(ws, "--workspace", root, *spelling)
        assert code == 2 and "'http://foo'" in err and err.count("\n") == 1 and out == ""


async def test_workspace_keys_and_values_stay_apart(ws: WorkspacePaths) -> None:
    code, out, err = await _mam(ws, "workspace", "--workspace", str(ws.root), "--broker", "mqtt://127.0.0.1:9")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("broker_unreachable"))
    assert line.startswith("broker_unreachable cannot reach"), line


def _status(ws: WorkspacePaths, job: str) -> str:
    return json.loads((ws.jobs / f"{job}.json").read_bytes())["status"]


async def test_writes_need_four_characters_and_take_several_jobs_and_selectors(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    base = ("--broker", url, "--workspace", str(ws.root))
    team = [f"team-{n}" for n in range(1, 7)]
    async with up_process(ws.root, ws.elsewhere, port):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            await pub.submit(prompt="p", agent="nobody", job_id="long-9", wait=True)
            for job in team:  # no runner serves `nobody`: they stay queued
                await pub.submit(prompt="p", agent="nobody", job_id=job, labels={"team": "x"}, wait=True)

        code, out, err = await _mam(ws, "cancel", "9", *base)  # ends `long-9` only, but 1 character is not enough
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "'9' is too short to cancel a job" in err and "long-9" in err and "4 characters" in err
        code, _, err = await _mam(ws, "cancel", "nosuchjob", *base)
        assert code == 1 and "no job 'nosuchjob'" in err and err.count("\n") == 1, err

        code, out, err = await _mam(ws, "cancel", "-l", "team=x", *base)  # 6 jobs: more than 5 need --yes
        assert code == 2 and out == "" and "this would cancel 6 jobs" in err and "--yes" in err, err
        assert [_status(ws, job) for job in ["long-9", *team]] == ["submitted"] * 7, "nothing was published"

        code, out, err = await _mam(ws, "cancel", "-l", "team=x", "--status", "submitted", "--yes", *base)
        assert code == 0, err
        assert "cancelling 6 jobs: " + ", ".join(team) in err
        assert out.splitlines() == [f"{job} cancelled" for job in team]
        assert _status(ws, "long-9") == "submitted"

        code, out, err = await _mam(ws, "retry", "team-1", "team-2", *base)  # several ids, each resolved
        assert code == 0, err
        assert "retrying 2 jobs: team-1, team-2" in err and len(out.split()) == 2
        code, _, err = await _mam(ws, "retry", "-l", "team=x", "--status", "cancelled", *base)
        assert code == 2 and "this would retry 6 jobs" in err


@pytest.mark.slow
async def test_wait_exits_with_the_jobs_outcome_and_logs_tail_with_timestamps(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    base = ("--broker", url, "--workspace", str(ws.root))
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "2", agent="shell", env=child_env()),
    ):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            await pub.submit(
                prompt="printf 'one\\ntwo\\nthree\\n'; sleep 0.3", agent="shell", job_id="ok-job", wait=True
            )
            await pub.submit(prompt="sleep 0.3; exit 7", agent="shell", job_id="bad-job", wait=True)
            await pub.submit(prompt="x", agent="nobody", job_id="queued-job", wait=True)
            await pub.submit(prompt="sleep 30", agent="shell", job_id="long-run", wait=True)
        await wait_for_state(url, workspace_id(ws.root), "long-run", lambda r: r["status"] == "running", timeout=30)
        code, out, err = await _mam(ws, "cancel", "long-run", *base)  # its runner stops it after the reply
        assert code == 0 and out == "cancel requested: long-run (was running)\n", err

        # -f --tail 1: the last logged line, then what comes live (the job goes on once it was shown)
        go = ws.elsewhere / "go"
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            await pub.submit(
                prompt=f"printf 'a\\nb\\nc\\n'; while [ ! -e {go} ]; do sleep 0.05; done; echo d",
                agent="shell",
                job_id="tail-job",
                wait=True,
            )
        await wait_for_state(url, workspace_id(ws.root), "tail-job", lambda r: r["output_bytes"] >= 6, timeout=30)
        async with await anyio.open_process(
            mam("logs", "tail-job", "-f", "--tail", "1", *base), cwd=ws.elsewhere, env=child_env()
        ) as logs:
            assert logs.stdout is not None
            with anyio.fail_after(20):
                shown = b""
                while not shown.endswith(b"c\n"):
                    shown += await logs.stdout.receive()
                go.touch()
                while not shown.endswith(b"d\n"):
                    shown += await logs.stdout.receive()
                assert await logs.wait() == 0
        assert shown == b"c\nd\n"
        code, out, err = await _mam(ws, "wait", "ok-job", *base)
        assert code == 0 and re.fullmatch(r"job ok-job succeeded \(exit 0\) in \d+s\n", out), (out, err)
        code, out, err = await _mam(ws, "--json", "wait", "ok-job", "bad", *base)  # a read: any unique suffix
        assert code == 1, err
        assert [(r["job_id"], r["status"], r["exit_code"]) for r in json.loads(out)] == [
            ("ok-job", "succeeded", 0),
            ("bad-job", "failed", 7),
        ]
        assert "1 of 2 jobs did not succeed: bad-job failed" in err
        code, out, err = await _mam(ws, "wait", "queued-job", "--timeout", "0.5", *base)
        assert code == 3 and "had not ended within 0.5s; it is submitted" in err, err
        code, _, err = await _mam(ws, "wait", "nosuchjob", *base)
        assert code == 1 and "no job 'nosuchjob'" in err

    code, out, err = await _mam(ws, "logs", "ok-job", "--tail", "2", "--workspace", str(ws.root))
    assert code == 0 and out == "two\nthree\n", err
    code, out, err = await _mam(ws, "logs", "ok-job", "--timestamps", "--tail", "3", "--workspace", str(ws.root))
    assert code == 0, err
    _, events, _ = await _mam(ws, "events", "ok-job", "--json", "--workspace", str(ws.root))
    recorded = {e["event"]["text"]: e["received_at"] for e in json.loads(events) if e["event"]["type"] == "output"}
    assert out.splitlines() == [f"{recorded[text]} {line}" for text in recorded for line in text.splitlines()]
    assert [line.split(" ", 1)[1] for line in out.splitlines()] == ["one", "two", "three"]


async def test_jobs_wide_sort_by_and_the_tree_under_a_root(ws: WorkspacePaths) -> None:
    logged_job(ws, "root-job", "2026-01-01T00:00:00", ev.Submitted(prompt="top", agent="claude"))
    logged_job(
        ws,
        "kid-job",
        "2026-01-01T00:01:00",
        ev.Submitted(prompt="under", agent="codex", parent="root-job", labels={"team": "x"}),
        ev.Claimed(runner="r1"),
        ev.Started(runner="r1"),
        ev.Failed(exit_code=7, error="boom: the build broke " + "x" * 80),
    )
    logged_job(ws, "grandkid", "2026-01-01T00:02:00", ev.Submitted(prompt="deep", agent="aider", parent="kid-job"))
    logged_job(ws, "other-root", "2026-01-01T00:03:00", ev.Submitted(prompt="alone", agent="bash"))
    root = ("--workspace", str(ws.root))

    code, out, err = await _mam(ws, "jobs", "-o", "wide", *root)
    assert code == 0, err
    header, *rows = [line.split() for line in out.splitlines()]
    assert header[:6] == ["JOB", "STATUS", "AGENT", "SESSION", "AGE", "DURATION"]
    assert header[6:12] == ["EXIT", "ERROR", "RUNNER", "ATTEMPT", "PARENT", "LABELS"] and header[-1] == "PROMPT"
    kid = next(line for line in out.splitlines() if line.startswith("kid-job"))
    assert " 7 " in kid and "boom: the build broke xxx" in kid and " r1 " in kid and " root-job " in kid
    assert "team=x" in kid and "x" * 60 not in kid, "the error is cut"
    code, plain, _ = await _mam(ws, "jobs", *root)
    assert "EXIT" not in plain and "RUNNER" not in plain

    async def order(*flags: str) -> list[str]:
        code, out, err = await _mam(ws, "jobs", *flags, *root)
        assert code == 0, err
        return [line.split()[0] for line in out.splitlines()[1:]]

    assert await order() == ["other-root", "grandkid", "kid-job", "root-job"]
    assert await order("--sort-by", "submitted") == await order()
    assert await order("--sort-by", "agent") == ["grandkid", "other-root", "root-job", "kid-job"]
    assert await order("--sort-by", "status") == ["kid-job", "other-root", "grandkid", "root-job"]
    assert (await order("--sort-by", "duration"))[0] == "kid-job"
    assert await order("--sort-by", "updated", "--limit", "1") == ["other-root"]

    code, out, err = await _mam(ws, "jobs", "tree", "kid-job", *root)
    assert code == 0 and out.splitlines() == [
        "kid-job [failed] codex: under",
        "`-- grandkid [submitted] aider: deep",
    ], err
    code, out, _ = await _mam(ws, "jobs", "tree", *root)
    assert out.splitlines() == [
        "root-job [submitted] claude: top",
        "`-- kid-job [failed] codex: under",
        "    `-- grandkid [submitted] aider: deep",
        "other-root [submitted] bash: alone",
    ]
    code, out, _ = await _mam(ws, "--json", "jobs", "tree", "root-j", *root)  # a read: a unique prefix will do
    assert [(r["job_id"], r["status"]) for r in json.loads(out)] == [
        ("root-job", "submitted"),
        ("kid-job", "failed"),
        ("grandkid", "submitted"),
    ]
    code, _, err = await _mam(ws, "jobs", "tree", "nosuch", *root)
    assert code == 1 and "no job 'nosuch'" in err


async def test_completion_scripts_for_bash_zsh_and_fish_complete_commands_and_choices(ws: WorkspacePaths) -> None:
    scripts = {}
    for shell in ("bash", "zsh", "fish"):
        code, out, err = await _mam(ws, "completion", shell)
        assert code == 0, err
        scripts[shell] = out
    # no `-o default`: a flag with nothing to offer offers nothing, not readline's file names
    assert "complete -o nospace -o bashdefault -F _python_argcomplete mam" in scripts["bash"]
    assert scripts["zsh"].startswith("#compdef mam") and "compdef _python_argcomplete mam" in scripts["zsh"]
    assert "complete --command mam" in scripts["fish"] and "_ARGCOMPLETE 1" in scripts["fish"]
    code, _, err = await _mam(ws, "completion", "tcsh")
    assert code == 2 and "'tcsh'" in err
    # the bash script, sourced in a real bash, completes a command and a flag's choices through mam itself
    env = child_env(PATH=f"{BIN}:/usr/bin:/bin")
    for line, words, expected in (
        ("mam can", "mam can", ["cancel"]),
        ("mam jobs --sort-by d", "mam jobs --sort-by d", ["duration"]),
    ):
        probe = (
            f'source <(mam completion bash); COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
            f"COMP_WORDS=({words}); COMP_CWORD={len(words.split()) - 1}; _python_argcomplete mam; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = await run(["bash", "-c", probe], cwd=ws.elsewhere, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().split() == expected


async def test_prune_dry_run_lines_up_every_id(ws: WorkspacePaths) -> None:
    logged_job(ws, "a1", "2026-01-01T00:00:00", ev.Submitted(prompt="p", agent="x"), ev.Cancelled())
    logged_job(ws, "a-much-longer-id", "2026-01-01T00:01:00", ev.Submitted(prompt="p", agent="x"), ev.Cancelled())
    code, out, err = await _mam(ws, "prune", "--older-than", "0s", "--dry-run", "--workspace", str(ws.root))
    assert code == 0, err
    lines = sorted(out.splitlines())
    assert [line.split()[0] for line in lines] == ["a-much-longer-id", "a1"]
    assert len({line.index("cancelled") for line in lines}) == 1, f"the status column is not aligned: {lines}"


async def test_show_prints_git_and_labels_in_words(ws: WorkspacePaths) -> None:
    git = ev.GitInfo(commit="abc1234", branch="main", dirty=True)
    logged_job(
        ws,
        "show-job",
        "2026-01-01T00:00:00",
        ev.Submitted(prompt="p", agent="x", labels={"team": "x", "k": "v"}, git=git),
    )
    code, out, err = await _mam(ws, "show", "show-job", "--workspace", str(ws.root))
    assert code == 0, err
    lines = out.splitlines()
    assert f"{'Git:':<14}at submit: abc1234 on main, with uncommitted changes" in lines
    assert f"{'Labels:':<14}k=v, team=x" in lines
    assert "{" not in out


async def test_logs_follow_of_a_job_queued_behind_a_busy_runner_says_so_first(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    go = ws.elsewhere / "go"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "1", agent="shell", env=child_env()),
    ):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            await pub.submit(
                prompt=f"while [ ! -e {go} ]; do sleep 0.05; done", agent="shell", job_id="busy-job", wait=True
            )
            await wait_for_state(url, workspace_id(ws.root), "busy-job", lambda r: r["status"] == "running", timeout=30)
            await pub.submit(prompt="echo done", agent="shell", job_id="next-job", wait=True)
        async with await anyio.open_process(
            mam("logs", "next-job", "-f", "--broker", url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
        ) as logs:
            assert logs.stderr is not None and logs.stdout is not None
            with anyio.fail_after(20):
                said = b""
                while b"\n" not in said:
                    said += await logs.stderr.receive()
                go.touch()
                assert await logs.wait() == 0
    first = said.decode().splitlines()[0]
    assert first == "mam: queued: every runner for 'shell' is busy (1 online)", first


@pytest.mark.fast
def test_a_reused_job_id_is_refused_as_taken_whether_the_job_finished_or_not() -> None:
    ctx = Context(job_id="build1", workspace="ws", event_id="e-2", received_at="2026-01-01T00:00:01.000Z")
    first = apply(None, ev.Submitted(prompt="p", agent="a"), ctx)
    assert isinstance(first, JobRecord)
    for status in (Status.SUCCEEDED, Status.RUNNING):
        refused = apply(msgspec.structs.replace(first, status=status), ev.Submitted(prompt="q", agent="a"), ctx)
        assert isinstance(refused, Refusal)
        assert refused.reason == (
            f"job id 'build1' is taken: that job was already submitted and is {status.value}; "
            "pick a new job id (or leave --job-id out for a generated one)"
        )
