"""Letting agents edit: the permission levels per runner and per job, run through the real Claude Code
(tests/agent_clis.py; told by its model server to write a file) by real `mam-agent` processes against `mam up`;
`--command` with `--format`; a worktree job's edit committed on its branch. Each level's edit, file written or
refused, per CLI (claude, codex, gemini, aider): tests/real_agents/test_real_agents_edits.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_clis import CLIS
from agent_edits_support import write_turns
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_rig, real_runner
from runner_support import TERMINAL, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

CLAUDE = CLIS["claude-code"]


def write(name: str, said: str) -> list[Turn]:
    """Claude's model: write `name`, then say `said`."""
    return [Turn(tool="Write", args={"file_path": name, "content": f"{name}\n"}), Turn(text=said)]


async def finished(url: str, ws: WorkspacePaths, *jobs: str) -> dict[str, dict]:
    ws_id = workspace_id(ws.root)
    return {
        job: await wait_for_state(url, ws_id, job, lambda r: r["status"] in TERMINAL, timeout=JOB_TIMEOUT)
        for job in jobs
    }


async def test_a_builtin_profile_edits_by_default_and_refuses_more_than_its_runner(ws: WorkspacePaths) -> None:
    """A runner without --permissions allows `edit`, its jobs' default: a job that asks no level edits; one asking
    `full` fails before its CLI starts, saying how to allow it. One CLI (the level's arguments are the profile's
    `edit` ones, run per CLI in test_real_agents_edits.py; the refusal is the runner's, before any CLI)."""
    agent = "claude-code"
    async with real_rig(CLIS[agent], ws, Script(write_turns(agent, "notes.md"))) as rig:
        edit = await rig.job("edit", "please edit the notes", agent=agent)
        wide = await rig.job("wide", "please edit the notes", "--permissions", "full", agent=agent)
    assert edit["status"] == "succeeded", edit.get("error")
    assert (ws.root / "notes.md").read_text().strip() == "notes.md"
    assert "permissions" not in edit, "a job that asked no level records none"
    assert wide["status"] == "failed" and wide["exit_code"] is None
    assert wide["error"] == (
        f"the job asks permissions 'full' but runner {agent}-1 allows at most 'edit'; resubmit "
        "with --permissions edit, or serve it with `mam-agent --permissions full`"
    )


async def test_the_runners_permissions_are_its_jobs_default_and_ceiling_and_a_job_may_ask_less(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    wide_model = Script([*write(name="full-default.txt", said="wrote it"), *write("asks-less.txt", "could not")])
    narrow_model = Script(write("ro-default.txt", "could not"))
    async with (
        up_process(ws.root, ws.elsewhere, port),
        real_runner(CLAUDE, url, ws, wide_model, "--permissions", "full", name="wide"),
        real_runner(
            CLAUDE,
            url,
            ws,
            narrow_model,
            "--profile",
            "claude-code",
            "--permissions",
            "read-only",
            agent="reader",
            name="narrow",
        ),
    ):
        await submit(url, ws, "ro-default", "write ro-default.txt", agent="reader")
        await submit(url, ws, "ro-asks-more", "write it", "--permissions", "edit", agent="reader")
        await submit(url, ws, "full-default", "write full-default.txt", agent="claude-code")
        records = await finished(url, ws, "full-default")  # one job at a time, in its model's order
        await submit(
            url, ws, "full-asks-less", "write asks-less.txt", "--permissions", "read-only", agent="claude-code"
        )
        records |= await finished(url, ws, "full-asks-less", "ro-default", "ro-asks-more")

    assert records["full-default"]["result"] == "wrote it", records["full-default"]["error"]
    assert (ws.root / "full-default.txt").exists() and "denials" not in records["full-default"]
    for job, name in (("full-asks-less", "asks-less.txt"), ("ro-default", "ro-default.txt")):
        assert records[job]["status"] == "succeeded", records[job]
        assert records[job]["denials"] == [f"Write {ws.root / name}"], "read-only: --permission-mode plan"
        assert not (ws.root / name).exists()
    asks_more = records["ro-asks-more"]
    assert asks_more["status"] == "failed" and "allows at most 'read-only'" in asks_more["error"]


def git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


async def test_a_worktree_job_that_edits_leaves_a_commit_on_its_branch(ws: WorkspacePaths) -> None:
    git(ws.root, "init", "-q", "-b", "main")
    (ws.root / "a.txt").write_text("one\n")
    git(ws.root, "add", "a.txt")
    git(ws.root, "commit", "-q", "-m", "one")
    head = git(ws.root, "rev-parse", "HEAD")
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        real_runner(CLAUDE, url, ws, Script(write("notes.md", "edited notes.md")), "--worktree"),
    ):
        await submit(url, ws, "wt-edit", "please edit the notes", agent="claude-code")
        record = (await finished(url, ws, "wt-edit"))["wt-edit"]

    assert record["status"] == "succeeded" and record["result"] == "edited notes.md", record
    assert git(ws.root, "show", "mam/wt-edit:notes.md") == "notes.md"
    assert git(ws.root, "rev-parse", "mam/wt-edit~1") == head, "one commit on the job's branch"
    assert not (ws.root / "notes.md").exists(), "the user's checkout is untouched"


async def test_a_command_with_format_is_read_as_its_stream_and_without_it_the_runner_warns(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    command = "claude -p --output-format stream-json --verbose --permission-mode acceptEdits"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        real_runner(
            CLAUDE,
            url,
            ws,
            Script(write("notes.md", "edited notes.md")),
            "--command",
            command,
            "--format",
            "claude-stream-json",
            agent="cc2",
            name="cc2",
        ),
        real_runner(CLAUDE, url, ws, Script([Turn(text="a summary")]), "--command", command, agent="cc3", name="cc3"),
    ):
        await submit(url, ws, "formatted", "please edit the notes", agent="cc2")
        await submit(url, ws, "raw", "summarise", agent="cc3")
        records = await finished(url, ws, "formatted", "raw")

    formatted, raw = records["formatted"], records["raw"]
    assert formatted["status"] == "succeeded" and formatted["result"] == "edited notes.md"
    assert formatted["usage"]["cost_usd"] > 0 and formatted["usage"]["output_tokens"] == 14  # two calls' 7
    assert (ws.root / "notes.md").read_text() == "notes.md\n"
    assert raw["status"] == "succeeded" and '"type":"result"' in raw["result"] and raw.get("usage") is None
    warned = [line for line in (ws.root.parent / "runner-cc3.log").read_text().splitlines() if "warning" in line]
    assert warned == [
        "mam-agent: warning: --command runs claude without --format: its output is kept as raw text, "
        "no result or usage is read from it; add --format claude-stream-json (with its stream output "
        "flags in the command)"
    ]
    assert "warning" not in (ws.root.parent / "runner-cc2.log").read_text()


@pytest.mark.slow  # 6-7 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_wrong_agent_names_get_the_nearest_one_and_an_alias_serves_a_stranded_job(ws: WorkspacePaths) -> None:
    env = child_env()
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    agent = await run(
        [str(BIN / "mam-agent"), "--agent", "claude", "--workspace", str(ws.root), "--broker", url],
        cwd=ws.elsewhere,
        env=env,
    )
    assert agent.returncode == 2
    assert agent.stderr.decode().splitlines() == [
        "mam-agent: error: --agent claude: no profile 'claude'; did you mean 'claude-code'? (`mam-agent --agent "
        "claude-code`, or `--agent claude --profile claude-code` to serve jobs submitted for 'claude'); known: "
        "aider, claude-code, codex, gemini, shell"
    ]

    async with up_process(ws.root, ws.elsewhere, port):
        stranded = await run(
            mam(
                "submit",
                "--prompt",
                "summarise",
                "--agent",
                "claude",
                "--job-id",
                "stranded",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert stranded.returncode == 0, stranded.stderr
        assert stranded.stderr.decode().splitlines() == [
            "mam: warning: no runner for 'claude' is online and no profile has that name: job stranded waits; did "
            "you mean 'claude-code'? `mam cancel stranded` and submit with --agent claude-code, or serve this name: "
            "`mam-agent --agent claude --profile claude-code`"
        ]

        (ws.root / ".mam" / "profiles.json").write_text('{"claude": {"alias": "claude-code"}}')
        model = Script([Turn(text="summarised"), Turn(text="summarised again")])
        async with real_runner(CLAUDE, url, ws, model, name="r1"):
            rescued = await wait_for_state(
                url, workspace_id(ws.root), "stranded", lambda r: r["status"] in TERMINAL, timeout=JOB_TIMEOUT
            )
            again = await run(
                mam(
                    "submit",
                    "--prompt",
                    "summarise again",
                    "--agent",
                    "claude",
                    "--job-id",
                    "served",
                    "--broker",
                    url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            served = await wait_for_state(
                url, workspace_id(ws.root), "served", lambda r: r["status"] in TERMINAL, timeout=JOB_TIMEOUT
            )
    assert rescued["status"] == "succeeded" and rescued["runner"] == "r1" and rescued["agent"] == "claude"
    assert again.returncode == 0 and again.stderr == b"", "a runner serving the alias is online: no warning"
    assert served["status"] == "succeeded" and served["result"] == "summarised again"
