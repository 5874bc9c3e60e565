"""`mam doctor`'s checks of the agent CLIs (installed, version, credentials, the folder they run in, root), and
`mam-agent` refusing or reporting them at start. The real agent CLIs (tests/agent_clis.py) on a PATH made for each
test, with only the ones a test names; a version mam was not tested with is a two-line script (a real CLI at another
version is not installed here)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from doctor_support import AGENT_CHECKS, SECRET, agents_path, bare_profiles, by_name, doctor, doctor_env, fix_under

from mam.agents.tested_clis import KNOWN

from brokers import free_port
from e2e import up_process
from support import BIN, CHECKOUT, DEAD_BROKER, Daemon, mam, run
from workspace_support import WorkspacePaths


async def test_a_missing_cli_fails_doctor_agent_with_its_install_line(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "claude"))
    code, report, text = await doctor(ws, env, "--agent", "gemini", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert code == 1
    assert checks["agent.gemini.cli"] == {
        "name": "agent.gemini.cli",
        "status": "fail",
        "detail": "command 'gemini' is not on PATH",
        "fix": "install Gemini CLI: npm install -g @google/gemini-cli@0.61.0",
    }
    assert [name for name in checks if name.startswith("agent.")] == [f"agent.gemini.{c}" for c in AGENT_CHECKS]
    assert "FAIL  agent.gemini.cli" in text
    assert fix_under(text, "agent.gemini.cli") == "install Gemini CLI: npm install -g @google/gemini-cli@0.61.0"


async def test_an_unknown_agent_is_a_one_line_usage_error(ws: WorkspacePaths) -> None:
    result = await run(
        mam("doctor", "--workspace", str(ws.root), "--agent", "gemeni"),
        cwd=ws.elsewhere,
        env=doctor_env(ws, agents_path(ws.root.parent)),
    )
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().count("\n") == 1
    assert result.stderr.decode().startswith("mam: error: --agent gemeni: no profile 'gemeni'; did you mean 'gemini'?")


async def test_an_untested_or_silent_version_warns_with_the_tested_one(ws: WorkspacePaths) -> None:
    path = agents_path(
        ws.root.parent,
        scripts={
            "claude": "#!/bin/sh\necho '2.0.3 (Claude Code)'\n",
            "codex": "#!/bin/sh\necho 'no such option' >&2\nexit 2\n",
        },
    )
    env = doctor_env(ws, path)
    code, report, text = await doctor(ws, env, "--agent", "claude-code", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.claude-code.version"]["status"] == "warn"
    assert checks["agent.claude-code.version"]["detail"] == "Claude Code 2.0.3: untested; mam was tested with 2.1.197"
    assert fix_under(text, "agent.claude-code.version").startswith("npm install -g @anthropic-ai/claude-code@2.1.197")
    codex = checks["agent.codex.version"]
    assert (
        codex["status"] == "warn" and codex["detail"] == "codex --version printed no version (exit 2: no such option)"
    )


async def test_a_version_that_never_answers_is_given_up_with_its_process_group(tmp_path: Path) -> None:
    from mam.agents.doctor import probe_version

    pids = tmp_path / "pids"
    hanging = tmp_path / "hangs"
    hanging.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pids}\nwait\n")
    hanging.chmod(0o755)
    version, said = probe_version(str(hanging), timeout=0.5)
    assert version is None and said == "no answer to --version in 0.5s"
    child = Path(f"/proc/{int(pids.read_text())}/stat")
    with anyio.fail_after(10):
        while child.exists() and child.read_text().rpartition(")")[2].split()[0] != "Z":
            await anyio.sleep(0.05)  # SIGKILL is delivered at once; its reaping by init may take a moment


async def test_credentials_are_named_and_their_values_never_printed(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "claude", "gemini", "codex"), OPENAI_API_KEY=SECRET)
    gemini_dir = Path(env["HOME"]) / ".gemini"
    gemini_dir.mkdir()
    (gemini_dir / ".env").write_text(f"# a comment\nexport GEMINI_API_KEY='{SECRET}'\n")
    code, report, text = await doctor(
        ws, env, "--agent", "claude-code", "--agent", "gemini", "--agent", "codex", "--broker", DEAD_BROKER
    )
    checks = by_name(report)
    assert checks["agent.codex.credentials"]["detail"] == "OPENAI_API_KEY is set"
    assert checks["agent.gemini.credentials"]["detail"] == f"GEMINI_API_KEY in {gemini_dir / '.env'}"
    missing = checks["agent.claude-code.credentials"]
    assert missing["status"] == "warn" and missing["detail"].startswith("none found: no ANTHROPIC_API_KEY")
    assert missing["fix"].startswith("export ANTHROPIC_API_KEY for the runner")
    assert SECRET not in text and SECRET not in json.dumps(report)


async def test_codex_with_a_model_provider_of_its_own_counts_that_providers_key(ws: WorkspacePaths) -> None:
    """Before: a codex runner pointed at a gateway by `model_provider` with `env_key` (tests/agent_clis.py's own setup)
    was warned it had no credentials, its key being neither OPENAI_API_KEY nor CODEX_API_KEY."""
    from agent_clis import CODEX_CONFIG

    env = doctor_env(ws, agents_path(ws.root.parent, "codex"), MAM_TEST_MODEL_KEY=SECRET)
    codex_home = Path(env["HOME"]) / ".codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(CODEX_CONFIG.format(url="http://127.0.0.1:9"), encoding="utf-8")
    _, report, text = await doctor(ws, env, "--agent", "codex", "--broker", DEAD_BROKER)
    key = by_name(report)["agent.codex.credentials"]
    assert key == {
        "name": "agent.codex.credentials",
        "status": "ok",
        "fix": None,
        "detail": f"MAM_TEST_MODEL_KEY is set (the env_key of model_provider mamtest in {config})",
    }, key
    env.pop("MAM_TEST_MODEL_KEY")
    _, report, text = await doctor(ws, env | {"OPENAI_API_KEY": SECRET}, "--agent", "codex", "--broker", DEAD_BROKER)
    key = by_name(report)["agent.codex.credentials"]
    assert key["status"] == "warn", "OpenAI's key is not the one this provider is sent"
    assert (
        key["detail"] == f"MAM_TEST_MODEL_KEY is not set: model_provider mamtest in {config} takes its key from it "
        "(env_key)"
    )
    assert fix_under(text, "agent.codex.credentials") == "export MAM_TEST_MODEL_KEY for the runner"
    elsewhere = ws.root.parent / "codex-home"
    elsewhere.mkdir()
    (elsewhere / "config.toml").write_text(
        'model_provider = "local"\n[model_providers.local]\nbase_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8"
    )
    _, report, _ = await doctor(ws, env | {"CODEX_HOME": str(elsewhere)}, "--agent", "codex", "--broker", DEAD_BROKER)
    assert by_name(report)["agent.codex.credentials"]["status"] == "ok", "$CODEX_HOME's provider without env_key"
    assert SECRET not in text and SECRET not in json.dumps(report)


async def test_aider_without_a_key_fails_where_a_runner_is_configured_for_it(ws: WorkspacePaths) -> None:
    """aider cannot run a job without a key (the runner fails each one before starting it): not a warning for an
    aider runner, whose doctor (`--agent aider`, or mam-agent at start) fails with the one-line fix."""
    env = doctor_env(ws, agents_path(ws.root.parent, "aider"))
    code, report, text = await doctor(ws, env, "--agent", "aider", "--broker", DEAD_BROKER)
    key = by_name(report)["agent.aider.credentials"]
    assert code == 1 and key["status"] == "fail" and key["detail"].startswith("none found: no OPENAI_API_KEY"), key
    assert fix_under(text, "agent.aider.credentials") == KNOWN["aider"].login_how
    _, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    assert by_name(report)["agent.aider.credentials"]["status"] == "warn", "no aider runner asked about: a warning"


async def test_the_built_in_gemini_and_codex_profiles_run_in_an_untrusted_folder_outside_git(
    ws: WorkspacePaths,
) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini", "codex"))
    _, report, _ = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.gemini.workspace"] == {
        "name": "agent.gemini.workspace",
        "status": "ok",
        "detail": f"{ws.root}: GEMINI_CLI_TRUST_WORKSPACE=true",
        "fix": None,
    }
    assert (
        checks["agent.codex.workspace"]["status"] == "ok"
        and "--skip-git-repo-check" in checks["agent.codex.workspace"]["detail"]
    )


@pytest.mark.slow
async def test_gemini_needs_a_trusted_folder_and_codex_a_git_repository(ws: WorkspacePaths) -> None:
    bare_profiles(ws)
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini", "codex"))
    _, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)  # not asked for: warnings
    checks = by_name(report)
    assert checks["agent.gemini.workspace"]["status"] == "warn" and checks["agent.codex.workspace"]["status"] == "warn"
    code, report, text = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert (
        checks["agent.gemini.workspace"]["status"] == "fail"
        and "not trusted" in checks["agent.gemini.workspace"]["detail"]
    )
    assert "--skip-trust" in fix_under(text, "agent.gemini.workspace")
    assert checks["agent.codex.workspace"]["status"] == "fail"
    assert fix_under(text, "agent.codex.workspace").startswith(f"git init {ws.root} and commit once")

    (Path(env["HOME"]) / ".gemini").mkdir(exist_ok=True)  # the real gemini made it, answering --version
    (Path(env["HOME"]) / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(ws.root): "TRUST_FOLDER"}))
    git = {
        **env,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", str(ws.root)], check=True, env=git)
    subprocess.run(["git", "-C", str(ws.root), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=git)
    _, report, _ = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--worktree", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert (
        checks["agent.gemini.workspace"]["status"] == "ok"
        and "TRUST_FOLDER" in checks["agent.gemini.workspace"]["detail"]
    )
    assert checks["agent.codex.workspace"] == {
        "name": "agent.codex.workspace",
        "status": "ok",
        "detail": f"{ws.root}: a git work tree",
        "fix": None,
    }
    assert checks["workspace.git"]["status"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="what `full` needs as root")
async def test_full_as_root_needs_is_sandbox_for_claude(ws: WorkspacePaths) -> None:
    path = agents_path(ws.root.parent, "claude")
    args = ("--agent", "claude-code", "--permissions", "full", "--broker", DEAD_BROKER)
    _, report, text = await doctor(ws, doctor_env(ws, path), *args)
    root = by_name(report)["agent.claude-code.root"]
    assert root["status"] == "ok" and "IS_SANDBOX=1" in root["detail"], "the built-in profile sets it at full"
    bare_profiles(ws)
    _, report, text = await doctor(ws, doctor_env(ws, path), *args)
    root = by_name(report)["agent.claude-code.root"]
    assert root["status"] == "fail" and "IS_SANDBOX=1" in root["detail"]
    assert fix_under(text, "agent.claude-code.root").startswith("export IS_SANDBOX=1 for mam-agent")
    _, report, _ = await doctor(ws, doctor_env(ws, path, IS_SANDBOX="1"), *args)
    assert by_name(report)["agent.claude-code.root"]["status"] == "ok"
    _, report, _ = await doctor(ws, doctor_env(ws, path), "--agent", "claude-code", "--broker", DEAD_BROKER)
    assert by_name(report)["agent.claude-code.root"]["status"] == "ok", "the default ceiling, edit, needs nothing"


async def test_mam_agent_refuses_a_missing_cli_in_one_line_with_its_install_line(ws: WorkspacePaths) -> None:
    result = await run(
        [str(BIN / "mam-agent"), "--agent", "gemini", "--workspace", str(ws.root), "--broker", DEAD_BROKER],
        cwd=ws.elsewhere,
        env=doctor_env(ws, agents_path(ws.root.parent, "claude")),
    )
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "mam-agent: error: --agent gemini: command 'gemini' is not on PATH; install Gemini "
        "CLI 0.61.0 (npm install -g @google/gemini-cli@0.61.0), or pass --command/--profile\n"
    )


async def test_mam_agent_reports_its_checks_at_start_and_serves(ws: WorkspacePaths) -> None:
    port = free_port()
    bare_profiles(ws)  # a gemini profile without the trust variable: the folder is untrusted
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini"))
    async with up_process(ws.root, ws.elsewhere, port):
        runner = Daemon(
            [
                str(BIN / "mam-agent"),
                "--agent",
                "gemini",
                "--workspace",
                str(ws.root),
                "--broker",
                f"mqtt://127.0.0.1:{port}",
            ],
            cwd=ws.elsewhere,
            env=env,
            log=ws.root.parent / "runner.log",
        )
        try:
            output = await runner.wait_for_output("serving", timeout=30)
        finally:
            runner.stop()
    doctor_lines = [line for line in output.splitlines() if "doctor:" in line]
    assert [line.split()[2] for line in doctor_lines] == ["agent.gemini.credentials", "agent.gemini.workspace"]
    assert doctor_lines[1].startswith(f"mam-agent: doctor: agent.gemini.workspace fail: {ws.root}: not trusted")
    assert "; fix: add --skip-trust" in doctor_lines[1]


@pytest.mark.fast
def test_docs_agents_lists_the_tested_versions_of_the_table() -> None:
    page = (CHECKOUT / "docs" / "agents.md").read_text(encoding="utf-8")
    for program, cli in KNOWN.items():
        row = next((line for line in page.splitlines() if line.startswith(f"| {cli.title} | `{program}` |")), None)
        assert row is not None, f"docs/agents.md has no row for {cli.title}"
        assert f"| {', '.join(cli.tested)} |" in row and f"`{cli.install}`" in row, row


async def test_doctor_says_what_mcp_server_each_job_of_an_agent_gets_and_how_its_tools_are_allowed(
    ws: WorkspacePaths,
) -> None:
    """`agent.NAME.delegation`: the runner's own `mam mcp` for each job, given the CLI's way (agents/job_mcp.py);
    a profile without `"mcp"` (shell) says its jobs get none."""
    env = doctor_env(ws, agents_path(ws.root.parent, "claude", "codex", "gemini"))
    _, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    checks = by_name(report)
    own = str(BIN / "mam")
    for agent, how in (
        ("claude-code", "--allowedTools mcp__mam"),
        ("codex", "default_tools_approval_mode=approve"),
        ("gemini", "GEMINI_CLI_HOME"),
    ):
        check = checks[f"agent.{agent}.delegation"]
        assert check["status"] == "ok" and f"`{own} mcp` as `mam`" in check["detail"] and how in check["detail"], check
    assert checks["agent.shell.delegation"]["status"] == "ok"
    assert "not given mam's MCP server" in checks["agent.shell.delegation"]["detail"]
