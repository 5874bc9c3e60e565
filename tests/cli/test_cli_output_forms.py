"""kubectl habits of the listings (issue 31): `-o json|yaml|name|wide` on each, `--json` the same as `-o json`,
`--sort-by=-FIELD`, unknown ids exit non-zero, `mam --help` in sections. Real `mam` processes on registries
and audit logs written by the projector's own code (replay, AuditLog, Registry)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from output_forms_support import logged_job
from runner_support import agent_runner

from mam.cli.commands import HELP_GROUPS
from mam.contract import events as ev

from brokers import free_port
from e2e import up_process
from support import child_env, mam, run
from workspace_support import WorkspacePaths


async def _mam(ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    done = await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _ran(seconds: int) -> tuple[ev.AnyEvent, ...]:
    """Claimed, started and succeeded `seconds` apart (the log's entries are 1 s apart: pad with outputs)."""
    pads = tuple(ev.Output(text=f"line {n}\n", seq=n) for n in range(seconds - 1))
    return (ev.Claimed(runner="r1"), ev.Started(runner="r1"), *pads, ev.Succeeded(exit_code=0))


@pytest.fixture
def jobs(ws: WorkspacePaths) -> WorkspacePaths:
    """Four jobs: a tree (root-job > kid-job > grandkid) and one alone; kid-job ran 5 s, other-root 2 s."""
    logged_job(ws, "root-job", "2026-01-01T00:00:00", ev.Submitted(prompt="top", agent="claude-code"))
    logged_job(
        ws,
        "kid-job",
        "2026-01-01T00:01:00",
        ev.Submitted(prompt="under", agent="codex", parent="root-job", labels={"team": "x"}, agent_session="s1"),
        *_ran(5),
    )
    logged_job(ws, "grandkid", "2026-01-01T00:02:00", ev.Submitted(prompt="deep", agent="aider", parent="kid-job"))
    logged_job(
        ws,
        "other-root",
        "2026-01-01T00:03:00",
        ev.Submitted(prompt="alone \x1b[31mred", agent="shell", agent_session="s1"),
        *_ran(2),
    )
    return ws


async def _forms(ws: WorkspacePaths, *command: str) -> dict[str, str]:
    """`command` printed in each form, and with --json; each exits 0."""
    printed = {}
    for name, flags in (
        ("table", ()),
        ("json", ("-o", "json")),
        ("--json", ("--json",)),
        ("yaml", ("-o", "yaml")),
        ("name", ("-o", "name")),
        ("wide", ("-o", "wide")),
    ):
        code, out, err = await _mam(ws, *command, *flags)
        assert code == 0, (command, flags, err)
        printed[name] = out
    assert printed["json"] == printed["--json"], "-o json is --json, byte for byte"
    assert yaml.safe_load(printed["yaml"]) == json.loads(printed["json"])
    assert "\x1b" not in printed["yaml"] and "\x1b" not in printed["name"]
    return printed


async def test_jobs_lists_in_every_form(jobs: WorkspacePaths) -> None:
    printed = await _forms(jobs, "jobs")
    listed = json.loads(printed["json"])
    assert [r["job_id"] for r in listed] == ["other-root", "grandkid", "kid-job", "root-job"]
    assert printed["name"].splitlines() == [f"job/{r['job_id']}" for r in listed]
    assert yaml.safe_load(printed["yaml"])[0]["prompt"] == "alone \x1b[31mred", "escaped in YAML, not lost"
    assert "RUNNER" in printed["wide"].splitlines()[0] and "RUNNER" not in printed["table"].splitlines()[0]
    # the filters apply to every form
    code, out, _ = await _mam(jobs, "jobs", "--agent", "codex", "-o", "name")
    assert code == 0 and out == "job/kid-job\n"
    code, out, _ = await _mam(jobs, "jobs", "--parent", "root-job", "-o", "yaml")
    assert [r["job_id"] for r in yaml.safe_load(out)] == ["kid-job"]
    # --json and another form disagree: one line, exit 2, nothing printed
    code, out, err = await _mam(jobs, "jobs", "--json", "-o", "yaml")
    assert code == 2 and out == "" and err.count("\n") == 1 and "-o yaml" in err
    code, _, err = await _mam(jobs, "jobs", "-o", "xml")
    assert code == 2 and "'xml'" in err and err.count("\n") == 1


async def test_the_tree_lists_in_json_yaml_and_name(jobs: WorkspacePaths) -> None:
    code, out, err = await _mam(jobs, "jobs", "tree", "root-job", "-o", "name")
    assert code == 0 and out.splitlines() == ["job/root-job", "job/kid-job", "job/grandkid"], err
    code, as_yaml, _ = await _mam(jobs, "jobs", "tree", "-o", "yaml")
    code, as_json, _ = await _mam(jobs, "--json", "jobs", "tree")
    assert yaml.safe_load(as_yaml) == json.loads(as_json)
    assert [r["job_id"] for r in json.loads(as_json)] == ["root-job", "kid-job", "grandkid", "other-root"]
    code, out, err = await _mam(jobs, "jobs", "tree", "-o", "wide", "--sort-by", "agent")  # as before: the tree
    assert code == 0 and out.splitlines()[0] == "root-job [submitted] claude-code: top"
    assert err == "mam: -o wide and --sort-by apply to the list, not the tree (ignored)\n"


@pytest.mark.slow
async def test_usage_events_sessions_and_show_list_in_every_form(jobs: WorkspacePaths) -> None:
    usage = await _forms(jobs, "usage")
    assert usage["name"].splitlines() == [f"agent/{g['key']}" for g in json.loads(usage["json"])["groups"]]
    assert "COST/JOB" in usage["wide"] and "COST/JOB" not in usage["table"]
    code, out, _ = await _mam(jobs, "usage", "--by", "parent", "-o", "name")
    assert code == 0 and "job/root-job" in out.splitlines()

    events = await _forms(jobs, "events", "kid-job")
    assert events["name"].splitlines() == [f"event/kid-job-{n}" for n in range(len(json.loads(events["json"])))]
    assert "kid-job-0" in events["wide"] and "kid-job-0" not in events["table"]

    sessions = await _forms(jobs, "session", "list")
    assert sessions["name"] == "session/s1\n"
    assert "alone" in sessions["wide"] and "alone" not in sessions["table"]

    plan = {}
    for form in ("json", "yaml", "name"):  # prune --dry-run lists what would go
        code, plan[form], err = await _mam(jobs, "prune", "--older-than", "0s", "--dry-run", "-o", form)
        assert code == 0, err
    assert yaml.safe_load(plan["yaml"]) == json.loads(plan["json"])
    assert plan["name"] == "job/other-root\n" and "kid-job" in yaml.safe_load(plan["yaml"])["kept"]  # grandkid runs

    for form, check in (("json", json.loads), ("yaml", yaml.safe_load)):
        code, out, err = await _mam(jobs, "show", "kid-j", "-o", form)
        assert code == 0 and check(out)["job_id"] == "kid-job", err
    code, out, _ = await _mam(jobs, "show", "kid-j", "-o", "name")
    assert out == "job/kid-job\n"
    code, again, _ = await _mam(jobs, "show", out.strip(), "-o", "name")  # what -o name prints names the job again
    assert code == 0 and again == out


async def test_worktrees_lists_in_every_form(jobs: WorkspacePaths) -> None:
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(jobs.root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    (jobs.root / ".gitignore").write_text(".mam/\n")
    git("add", ".gitignore")
    git("commit", "-q", "-m", "first")
    git("branch", "mam/kid-job")
    printed = await _forms(jobs, "worktrees")
    assert printed["name"] == "job/kid-job\n"
    assert [item["branch"] for item in json.loads(printed["json"])] == ["mam/kid-job"]
    assert "TIP" in printed["wide"] and "TIP" not in printed["table"]


async def test_sort_by_takes_a_sign_for_the_direction(jobs: WorkspacePaths) -> None:
    async def order(*flags: str) -> list[str]:
        code, out, err = await _mam(jobs, "jobs", *flags, "-o", "name")
        assert code == 0, err
        return [line.removeprefix("job/") for line in out.splitlines()]

    # a bare field keeps the order it always had: durations longest first, agents A to Z
    assert (await order("--sort-by", "duration"))[:2] == ["kid-job", "other-root"]
    assert await order("--sort-by=-duration") == await order("--sort-by", "duration")
    assert (await order("--sort-by=+duration"))[-2:] == ["other-root", "kid-job"]
    assert await order("--sort-by", "agent") == ["grandkid", "root-job", "kid-job", "other-root"]
    assert await order("--sort-by=-agent") == ["other-root", "kid-job", "root-job", "grandkid"]
    assert await order("--sort-by=+submitted") == ["root-job", "kid-job", "grandkid", "other-root"]
    assert await order("--sort-by=-submitted", "--limit", "1") == ["other-root"]
    code, _, err = await _mam(jobs, "jobs", "--sort-by=-size")
    assert code == 2 and "'-size'" in err and err.count("\n") == 1


async def test_an_unknown_id_exits_non_zero_for_every_command_that_reads_one(jobs: WorkspacePaths) -> None:
    commands = [
        ("jobs", "--parent", "nosuch"),
        ("jobs", "tree", "nosuch"),
        ("jobs", "--parent", "nosuch", "-o", "name"),
        ("show", "nosuch"),
        ("events", "nosuch"),
        ("logs", "nosuch"),
        ("diff", "nosuch"),
        ("merge", "nosuch"),
        ("discard", "nosuch"),
        ("show", "nosuch", "-o", "yaml"),
    ]
    for command in commands:
        code, out, err = await _mam(jobs, *command)
        assert code == 1 and out == "" and "'nosuch'" in err and err.count("\n") == 1, (command, code, err)
    # a known parent with no children is no error
    code, out, err = await _mam(jobs, "jobs", "--parent", "grandkid")
    assert code == 0 and out == "" and "no jobs match" in err


async def test_help_groups_the_commands_as_kubectl_does(ws: WorkspacePaths) -> None:
    done = await run(mam("--help"), cwd=ws.elsewhere)
    out = done.stdout.decode()
    assert done.returncode == 0
    titles = [title for title, _ in HELP_GROUPS]
    assert [t.split()[0] for t in titles] == ["Basic", "Live", "Review", "Admin"]
    at = [out.index(f"\n{title}:\n") for title in titles]
    assert at == sorted(at) and "\nCOMMAND\n" not in out
    sections = [out[start:end] for start, end in zip(at, [*at[1:], out.index("\noptions:")], strict=True)]
    for (_, names), text in zip(HELP_GROUPS, sections, strict=True):
        listed = [line.split()[0] for line in text.splitlines()[2:] if line.startswith("  ") and line[2] != " "]
        assert listed == list(names)
    every = [name for _, names in HELP_GROUPS for name in names]
    assert len(every) == len(set(every)) == 29


@pytest.mark.slow
async def test_agents_list_in_every_form_and_writes_to_unknown_jobs_exit_1(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(
            url, ws, "--profile", "shell", "--label", "gpu=a100", agent="shell", name="runner-one", env=child_env()
        ),
    ):
        printed = await _forms(ws, "agents", "--broker", url)
        assert printed["name"] == "runner/runner-one\n"
        assert [s["agent_id"] for s in json.loads(printed["json"])] == ["runner-one"]
        header = printed["wide"].splitlines()[0].split()
        assert header[-5:] == ["PID", "STARTED", "ALIASES", "LABELS", "JOBS"] and "PID" not in printed["table"]
        # the query index is current while the projector runs: the largest --limit goes to SQLite, more is refused
        code, _, err = await _mam(ws, "jobs", "--limit", "2147483647")
        assert code == 0 and "Traceback" not in err, err
        code, _, err = await _mam(ws, "jobs", "--limit", "99999999999999999999999")
        assert code == 2 and err.count("\n") == 1 and "--limit" in err, err
        for command in (
            ("cancel", "nosuch"),
            ("retry", "nosuch"),
            ("answer", "nosuch", "yes"),
            ("wait", "nosuch"),
            ("logs", "nosuch", "-f"),
            ("submit", "--prompt", "p", "--agent", "shell", "--parent", "nosuch"),
            ("submit", "--prompt", "p", "--agent", "shell", "--after", "nosuch"),
        ):
            code, out, err = (
                await _mam(ws, *command, "--broker", url, "--timeout", "10")
                if command[0] != "logs"
                else await _mam(ws, *command, "--broker", url)
            )
            assert code == 1 and "nosuch" in err and "Traceback" not in err, (command, code, err)
