"""A job's environment (agents/job_env.py): the runner's own mam first on PATH, the profile's variables over the
runner's, and an agent's failure as one plain line (agents/formats/verdict.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runner_support import TERMINAL, agent_runner, submit

from mam.agents.formats.base import Outcome
from mam.agents.formats.verdict import failure, one_line_plain
from mam.agents.job_env import ProfileEnv, job_environment, own_mam_dir

from brokers import free_port
from e2e import up_process, workspace_id
from support import BIN, child_env, wait_for_state
from workspace_support import WorkspacePaths

GEMINI_UNTRUSTED = (  # Gemini CLI 0.61.0's stderr in a folder it was not told to trust, exit 55
    'Approval mode overridden to "default" because the current folder is not trusted.\n'
    'Approval mode overridden to "default" because the current folder is not trusted.\n'
    "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the "
    "`GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode.\x1b[0m\n"
)


async def test_a_job_of_a_runner_started_by_its_full_path_runs_that_runners_mam(ws: WorkspacePaths) -> None:
    """The Quick start's `.venv/bin/mam-agent` from a shell whose PATH has no mam: the job's `mam` is the
    runner's (before, `sh: mam: not found`, and a job that ignored the failure still succeeded)."""
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    script = (
        'command -v mam >/dev/null || exit 7\nreadlink -f "$(command -v mam)"\nmam jobs --json >/dev/null || exit 8\n'
    )
    env = child_env(PATH="/usr/bin:/bin", MAM_BROKER_URL=None)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", env=env),
    ):
        await submit(url, ws, "job-path", script, agent="shell")
        record = await wait_for_state(url, workspace_id(ws.root), "job-path", lambda r: r["status"] in TERMINAL)
    assert record["status"] == "succeeded", record
    assert record["result"].strip() == str((BIN / "mam").resolve())


@pytest.mark.fast
def test_the_profiles_variables_replace_the_runners_and_only_mam_is_put_first_on_path() -> None:
    extra = ProfileEnv(always={"GEMINI_CLI_TRUST_WORKSPACE": "true"}, levels={"full": {"IS_SANDBOX": "1"}})
    base = {"PATH": "/usr/bin:/bin", "IS_SANDBOX": "yes", "MAM_PROMPT": "stale"}
    env, fits = job_environment(
        base=base,
        job_id="j1",
        workspace_id="w",
        workspace_root=Path("/w"),
        broker_url="mqtt://b",
        prompt="p",
        extra=extra.for_level("full"),
    )
    assert fits and env["IS_SANDBOX"] == "1" and env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert (env["MAM_JOB_ID"], env["MAM_PROMPT"], env["MAM_BROKER_URL"]) == ("j1", "p", "mqtt://b")
    first, *rest = env["PATH"].split(os.pathsep)
    assert first == own_mam_dir() and os.listdir(first) == ["mam"] and rest == ["/usr/bin", "/bin"]
    edit, _ = job_environment(
        base=base,
        job_id="j1",
        workspace_id="w",
        workspace_root=Path("/w"),
        broker_url=None,
        prompt="p",
        extra=extra.for_level("edit"),
    )
    assert edit["IS_SANDBOX"] == "yes", "only full sets it"


@pytest.mark.fast
def test_an_agents_error_is_one_line_without_escape_codes() -> None:
    error = failure(Outcome(complete=False), program="gemini", code=55, stderr=GEMINI_UNTRUSTED)
    assert "\n" not in error and "\x1b" not in error
    assert error == (
        "gemini stopped before it reported a result (exit code 55); stderr: Approval mode overridden to "
        '"default" because the current folder is not trusted. | Gemini CLI is not running in a trusted '
        "directory. To proceed, either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` "
        "environment variable, or trust this directory in interactive mode."
    )
    assert one_line_plain("\x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[1;31mred\x1b[0m\r\n\tnext") == "link red | next"
    reported = Outcome(complete=True, error='API Error: 401\n\x1b[2m{"type":"error"}\x1b[0m')
    assert failure(reported, program="claude", code=1, stderr="") == 'API Error: 401 | {"type":"error"}'
