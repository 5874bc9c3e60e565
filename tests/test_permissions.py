"""Letting agents edit: the built-in profiles' permission levels, per runner and per job, run through the
fake `claude`, `codex`, `gemini` and `aider` (each parses its argv as its CLI does and edits `notes.md`
only when its flags allow it) by real `mam-agent` processes against `mam up`; `--command` with
`--format`; a worktree job's edit committed on its branch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_runner_support import TERMINAL, agent_runner, submit

from brokers import free_port
from conftest import WorkspacePaths
from e2e import up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state

FAKES = Path(__file__).parent / "fake_agents"
PROMPT = "please edit the notes"
PROGRAM = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "aider": "aider"}


def fake_env() -> dict[str, str]:
    """The fakes first on PATH (and this Python for their `env python3`), and a key for aider (whose jobs the
    runner fails without one)."""
    path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return child_env(PATH=path, PYTHONDONTWRITEBYTECODE="1", OPENAI_API_KEY="sk-fake-for-aider")


async def finished(url: str, ws: WorkspacePaths, *jobs: str) -> dict[str, dict]:
    ws_id = workspace_id(ws.root)
    return {job: await wait_for_state(url, ws_id, job, lambda r: r["status"] in TERMINAL, timeout=20) for job in jobs}


@pytest.mark.parametrize("agent", sorted(PROGRAM))
async def test_a_builtin_profile_edits_at_edit_reads_only_when_asked_and_refuses_more_than_its_runner(
    agent: str, ws: WorkspacePaths
) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(url, ws, agent=agent, env=fake_env()):
        await submit(url, ws, "edit", PROMPT, agent=agent)
        await submit(url, ws, "look", PROMPT, "--permissions", "read-only", agent=agent)
        await submit(url, ws, "wide", PROMPT, "--permissions", "full", agent=agent)
        records = await finished(url, ws, "edit", "look", "wide")

    edit, look, wide = records["edit"], records["look"], records["wide"]
    assert edit["status"] == "succeeded", edit
    assert (ws.root / "notes.md").read_text() == f"{PROGRAM[agent]}: {PROMPT}\n", "edited once: read-only did not"
    assert "permissions" not in edit, "a job that asked no level records none"
    assert look["status"] == "succeeded" and look["permissions"] == "read-only", look
    said = look["result"] if agent != "aider" else look["result"].splitlines()[-2]
    assert said.startswith(("I could not edit notes.md", "I cannot edit notes.md", "Did not apply edit")), said
    assert wide["status"] == "failed" and wide["exit_code"] is None
    assert wide["error"] == ("the job asks permissions 'full' but runner r1 allows at most 'edit'; resubmit with "
                             "--permissions edit, or serve it with `mam-agent --permissions full`")


async def test_the_runners_permissions_are_its_jobs_default_and_ceiling_and_a_job_may_ask_less(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    env = fake_env()
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--permissions", "full", agent="claude-code", env=env, name="wide"),
        agent_runner(url, ws, "--profile", "claude-code", "--permissions", "read-only", agent="reader",
                     env=env, name="narrow"),
    ):
        await submit(url, ws, "full-default", PROMPT, agent="claude-code")
        await submit(url, ws, "full-asks-less", PROMPT, "--permissions", "read-only", agent="claude-code")
        await submit(url, ws, "ro-default", PROMPT, agent="reader")
        await submit(url, ws, "ro-asks-more", PROMPT, "--permissions", "edit", agent="reader")
        records = await finished(url, ws, "full-default", "full-asks-less", "ro-default", "ro-asks-more")

    assert records["full-default"]["result"] == "edited notes.md", records["full-default"]["error"]
    assert records["full-asks-less"]["result"].startswith("I could not edit"), "read-only: --permission-mode plan"
    assert records["ro-default"]["result"].startswith("I could not edit"), "the runner's read-only is the default"
    assert (ws.root / "notes.md").read_text() == f"claude: {PROMPT}\n"
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
        agent_runner(url, ws, "--worktree", agent="claude-code", env=fake_env()),
    ):
        await submit(url, ws, "wt-edit", PROMPT, agent="claude-code")
        record = (await finished(url, ws, "wt-edit"))["wt-edit"]

    assert record["status"] == "succeeded" and record["result"] == "edited notes.md", record
    assert git(ws.root, "show", "mam/wt-edit:notes.md") == f"claude: {PROMPT}"
    assert git(ws.root, "rev-parse", "mam/wt-edit~1") == head, "one commit on the job's branch"
    assert not (ws.root / "notes.md").exists(), "the user's checkout is untouched"


async def test_a_command_with_format_is_read_as_its_stream_and_without_it_the_runner_warns(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    command = "claude -p --output-format stream-json --verbose --permission-mode acceptEdits"
    env = fake_env()
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--command", command, "--format", "claude-stream-json", agent="cc2", env=env,
                     name="cc2"),
        agent_runner(url, ws, "--command", command, agent="cc3", env=env, name="cc3"),
    ):
        await submit(url, ws, "formatted", PROMPT, agent="cc2")
        await submit(url, ws, "raw", "summarise", agent="cc3")
        records = await finished(url, ws, "formatted", "raw")

    formatted, raw = records["formatted"], records["raw"]
    assert formatted["status"] == "succeeded" and formatted["result"] == "edited notes.md"
    assert formatted["usage"]["cost_usd"] == 0.0123 and formatted["usage"]["output_tokens"] == 345
    assert (ws.root / "notes.md").read_text() == f"claude: {PROMPT}\n"
    assert raw["status"] == "succeeded" and '"type": "result"' in raw["result"] and raw.get("usage") is None
    warned = [line for line in (ws.root.parent / "runner-cc3.log").read_text().splitlines() if "warning" in line]
    assert warned == ["mam-agent: warning: --command runs claude without --format: its output is kept as raw text, "
                      "no result or usage is read from it; add --format claude-stream-json (with its stream output "
                      "flags in the command)"]
    assert "warning" not in (ws.root.parent / "runner-cc2.log").read_text()


async def test_wrong_agent_names_get_the_nearest_one_and_an_alias_serves_a_stranded_job(ws: WorkspacePaths) -> None:
    env = fake_env()
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    agent = await run([str(BIN / "mam-agent"), "--agent", "claude", "--workspace",
                       str(ws.root), "--broker", url], cwd=ws.elsewhere, env=env)
    assert agent.returncode == 2
    assert agent.stderr.decode().splitlines() == [
        "mam-agent: error: --agent claude: no profile 'claude'; did you mean 'claude-code'? (`mam-agent --agent "
        "claude-code`, or `--agent claude --profile claude-code` to serve jobs submitted for 'claude'); known: "
        "aider, claude-code, codex, gemini, shell"]

    async with up_process(ws.root, ws.elsewhere, port):
        stranded = await run(mam("submit", "--prompt", "summarise", "--agent", "claude", "--job-id", "stranded",
                                 "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert stranded.returncode == 0, stranded.stderr
        assert stranded.stderr.decode().splitlines() == [
            "mam: warning: no runner for 'claude' is online and no profile has that name: job stranded waits; did "
            "you mean 'claude-code'? `mam cancel stranded` and submit with --agent claude-code, or serve this name: "
            "`mam-agent --agent claude --profile claude-code`"]

        (ws.root / ".mam" / "profiles.json").write_text('{"claude": {"alias": "claude-code"}}')
        async with agent_runner(url, ws, agent="claude-code", env=env):
            rescued = await wait_for_state(url, workspace_id(ws.root), "stranded",
                                           lambda r: r["status"] in TERMINAL, timeout=20)
            again = await run(mam("submit", "--prompt", "summarise again", "--agent", "claude", "--job-id",
                                  "served", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
            served = await wait_for_state(url, workspace_id(ws.root), "served",
                                          lambda r: r["status"] in TERMINAL, timeout=20)
    assert rescued["status"] == "succeeded" and rescued["runner"] == "r1" and rescued["agent"] == "claude"
    assert again.returncode == 0 and again.stderr == b"", "a runner serving the alias is online: no warning"
    assert served["status"] == "succeeded" and served["result"] == "answer: summarise again"
