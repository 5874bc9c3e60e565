"""`mam doctor` against a real `mam up`, and `mam-agent` refusing or reporting at start: the checklist, its fix
lines, its exit code and its `--json`. The real agent CLIs (tests/agent_clis.py) on a PATH made for each test, with
only the ones a test names (others may be installed on this machine, and must not be found); a version mam was not
tested with is a two-line script (a real CLI at another version is not installed here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import anyio
import pytest
from agent_clis import CLIS

from mam.agents.tested_clis import KNOWN

from brokers import free_port
from conftest import CHECKOUT, WorkspacePaths
from e2e import up_process
from support import BIN, DEAD_BROKER, Daemon, child_env, mam, run

PROGRAMS = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "aider": "aider"}
AGENT_CHECKS = ("cli", "version", "credentials", "workspace", "root")
WORKSPACE_CHECKS = ("workspace.config", "workspace.dir", "workspace.files", "workspace.modes", "workspace.owner",
                    "workspace.disk", "workspace.git", "workspace.profiles", "broker.reachable", "projector.online", "projector.key")
SECRET = "sk-test-DO-NOT-PRINT-7f3a9c"


def agents_path(tmp: Path, *programs: str, scripts: dict[str, str] | None = None) -> str:
    """A PATH holding only these real CLIs (and `scripts`, written there), node for the npm ones' shebang, python3,
    git and sh."""
    bin_dir = tmp / f"bin-{len(list(tmp.glob('bin-*')))}"
    bin_dir.mkdir()
    for program in programs:
        (bin_dir / program).symlink_to(CLIS[PROGRAMS[program]].require())
    for name, text in (scripts or {}).items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    tools = (("node", shutil.which("node")), ("python3", sys.executable), ("git", shutil.which("git")),
             ("sh", shutil.which("sh")))
    for tool, found in tools:
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def doctor_env(ws: WorkspacePaths, path: str, **extra: str | None) -> dict[str, str]:
    """A clean environment: this PATH, an empty HOME (no login files), no agent credentials, no broker URL
    (so `mam doctor` finds `mam up` by the workspace's runtime file, as a user's shell would)."""
    home = ws.root.parent / "home"
    home.mkdir(exist_ok=True)
    env = child_env(PATH=path, HOME=str(home), MAM_BROKER_URL=None, IS_SANDBOX=None, PYTHONDONTWRITEBYTECODE="1")
    for cli in KNOWN.values():
        for key in cli.keys:
            env.pop(key, None)
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


async def doctor(ws: WorkspacePaths, env: dict[str, str], *args: str) -> tuple[int, dict, str]:
    """`mam doctor --json ARGS` and `mam doctor ARGS`: the exit code (the same for both), the JSON, the text."""
    done = {}

    async def doctor_as(form: str, *extra: str) -> None:
        done[form] = await run(mam("doctor", "--workspace", str(ws.root), *extra, *args), cwd=ws.elsewhere, env=env)

    async with anyio.create_task_group() as both:  # at once: each asks every CLI found its --version (gemini: 1 s)
        both.start_soon(doctor_as, "json", "--json")
        both.start_soon(doctor_as, "text")
    as_json, as_text = done["json"], done["text"]
    assert as_json.returncode == as_text.returncode, (as_json.stderr, as_text.stderr)
    assert as_json.stderr == b"" and as_text.stderr == b"", as_text.stderr
    return as_json.returncode, json.loads(as_json.stdout), as_text.stdout.decode()


def by_name(report: dict) -> dict[str, dict]:
    return {check["name"]: check for check in report["checks"]}


def fix_under(text: str, name: str) -> str:
    """The `fix:` line printed under check `name` in the checklist."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[1:2] == [name])
    assert lines[at + 1].strip().startswith("fix: "), lines[at:at + 2]
    return lines[at + 1].strip().removeprefix("fix: ")


async def test_a_healthy_workspace_served_by_mam_up_passes_and_absent_clis_are_not_installed(
    ws: WorkspacePaths,
) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "claude"), ANTHROPIC_API_KEY=SECRET)
    async with up_process(ws.root, ws.elsewhere, free_port()) as up:
        code, report, text = await doctor(ws, env)
    checks = by_name(report)
    assert code == 0 and report["ok"] is True, text
    for name in WORKSPACE_CHECKS:
        assert checks[name]["status"] in (("ok", "skip") if name == "workspace.git" else ("ok",)), checks[name]
    assert "runtime.json" in checks["broker.reachable"]["detail"], "found as a client finds it: the runtime file"
    assert f"pid {up.pid}" in checks["projector.online"]["detail"]
    assert checks["agent.claude-code.version"] == {
        "name": "agent.claude-code.version", "status": "ok", "detail": "Claude Code 2.1.197: tested with mam",
        "fix": None}
    assert checks["agent.claude-code.credentials"]["detail"] == "ANTHROPIC_API_KEY is set"
    for absent in ("codex", "gemini", "aider"):
        cli = checks[f"agent.{absent}.cli"]
        assert cli["status"] == "skip" and cli["detail"].startswith("not installed"), cli
        assert cli["fix"] == f"install {KNOWN[absent].title}: {KNOWN[absent].install}"
        assert {checks[f"agent.{absent}.{c}"]["status"] for c in AGENT_CHECKS[1:]} == {"skip"}
    assert "skip  agent.gemini.cli" in text and "agent.gemini.version" not in text, "the text shows what matters"
    counted = report["counts"]
    assert counted["fail"] == counted["warn"] == 0
    assert text.splitlines()[-1] == f"0 failed, 0 warnings, {counted['ok']} ok, {counted['skip']} skipped: mam will work here"
    assert SECRET not in text and SECRET not in json.dumps(report)


async def test_the_broker_down_fails_with_a_fix_line_and_the_projector_is_not_asked(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent))
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port):
        pass  # served once: .mam/ and its key exist; now nothing listens
    code, report, text = await doctor(ws, env, "--broker", f"mqtt://127.0.0.1:{port}")
    checks = by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["broker.reachable"]["status"] == "fail"
    assert f"mqtt://127.0.0.1:{port} (from --broker) cannot be reached" in checks["broker.reachable"]["detail"]
    assert fix_under(text, "broker.reachable").startswith(f"start the workspace's broker and projector: mam up "
                                                          f"--workspace {ws.root}")
    assert checks["projector.online"]["status"] == "skip"
    assert checks["projector.key"]["status"] == "ok" and "not compared" in checks["projector.key"]["detail"]
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == ["broker.reachable"]
    assert "FAIL  broker.reachable" in text and text.rstrip().endswith("something mam needs is missing")


async def test_a_planted_link_or_fifo_under_mam_fails_and_a_linked_registry_dir_does_not(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent))
    elsewhere_jobs = ws.root.parent / "jobs-elsewhere"
    elsewhere_jobs.mkdir(mode=0o700)
    ws.jobs.parent.mkdir(mode=0o700)
    ws.jobs.symlink_to(elsewhere_jobs)  # a registry dir the user chose to keep elsewhere
    code, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    assert by_name(report)["workspace.files"]["status"] == "ok", by_name(report)["workspace.files"]

    planted = elsewhere_jobs / "victim.json"
    planted.symlink_to("/etc/passwd")
    fifo = ws.root / ".mam" / "runtime.json"
    os.mkfifo(fifo, 0o600)
    hostile = ws.root / ".mam" / "x\x1b[2J.json"  # a name that would clear the reader's terminal
    hostile.symlink_to(ws.root)
    code, report, text = await doctor(ws, env, "--broker", DEAD_BROKER)
    files = by_name(report)["workspace.files"]
    assert code == 1 and files["status"] == "fail"
    assert f"{ws.jobs / 'victim.json'} is a symbolic link" in files["detail"] and f"{fifo} is a fifo" in files["detail"]
    assert f"{hostile} is a symbolic link" in files["detail"]
    assert fix_under(text, "workspace.files").startswith("remove what was planted (rm ")
    assert "\x1b" not in text and "x\\x1b[2J.json" in text, "shown escaped, never obeyed"
    assert os.readlink(planted) == "/etc/passwd", "the doctor changes nothing"


async def test_loose_modes_warn_and_a_readable_signing_key_fails(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent))
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port):
        pass
    record = ws.root / ".mam" / "notes.txt"
    record.write_text("x")
    record.chmod(0o644)
    _, report, text = await doctor(ws, env, "--broker", DEAD_BROKER)
    modes = by_name(report)["workspace.modes"]
    assert modes["status"] == "warn" and f"{record} is 0644" in modes["detail"]
    assert fix_under(text, "workspace.modes").startswith(f"chmod -R go-rwx {ws.root / '.mam'}")
    key = ws.root / ".mam" / "projector.key"
    key.chmod(0o640)
    code, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    modes = by_name(report)["workspace.modes"]
    assert code == 1 and modes["status"] == "fail" and "signing key" in modes["detail"]
    assert modes["fix"].startswith(f"chmod 600 {key}")


async def test_a_missing_cli_fails_doctor_agent_with_its_install_line(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "claude"))
    code, report, text = await doctor(ws, env, "--agent", "gemini", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert code == 1
    assert checks["agent.gemini.cli"] == {"name": "agent.gemini.cli", "status": "fail",
                                          "detail": "command 'gemini' is not on PATH",
                                          "fix": "install Gemini CLI: npm install -g @google/gemini-cli@0.61.0"}
    assert [name for name in checks if name.startswith("agent.")] == [f"agent.gemini.{c}" for c in AGENT_CHECKS]
    assert "FAIL  agent.gemini.cli" in text
    assert fix_under(text, "agent.gemini.cli") == "install Gemini CLI: npm install -g @google/gemini-cli@0.61.0"


async def test_an_unknown_agent_is_a_one_line_usage_error(ws: WorkspacePaths) -> None:
    result = await run(mam("doctor", "--workspace", str(ws.root), "--agent", "gemeni"), cwd=ws.elsewhere,
                       env=doctor_env(ws, agents_path(ws.root.parent)))
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().count("\n") == 1
    assert result.stderr.decode().startswith("mam: error: --agent gemeni: no profile 'gemeni'; did you mean 'gemini'?")


async def test_an_untested_or_silent_version_warns_with_the_tested_one(ws: WorkspacePaths) -> None:
    path = agents_path(ws.root.parent, scripts={
        "claude": "#!/bin/sh\necho '2.0.3 (Claude Code)'\n",
        "codex": "#!/bin/sh\necho 'no such option' >&2\nexit 2\n",
    })
    env = doctor_env(ws, path)
    code, report, text = await doctor(ws, env, "--agent", "claude-code", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.claude-code.version"]["status"] == "warn"
    assert checks["agent.claude-code.version"]["detail"] == "Claude Code 2.0.3: untested; mam was tested with 2.1.197"
    assert fix_under(text, "agent.claude-code.version").startswith("npm install -g @anthropic-ai/claude-code@2.1.197")
    codex = checks["agent.codex.version"]
    assert codex["status"] == "warn" and codex["detail"] == "codex --version printed no version (exit 2: no such option)"


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
    code, report, text = await doctor(ws, env, "--agent", "claude-code", "--agent", "gemini", "--agent", "codex",
                                      "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.codex.credentials"]["detail"] == "OPENAI_API_KEY is set"
    assert checks["agent.gemini.credentials"]["detail"] == f"GEMINI_API_KEY in {gemini_dir / '.env'}"
    missing = checks["agent.claude-code.credentials"]
    assert missing["status"] == "warn" and missing["detail"].startswith("none found: no ANTHROPIC_API_KEY")
    assert missing["fix"].startswith("export ANTHROPIC_API_KEY for the runner")
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


BARE_PROFILES: Final = {
    "gemini": {"argv": ["gemini", "--output-format", "stream-json"], "format": "gemini-stream-json"},
    "codex": {"argv": ["codex", "exec", "--json", "-"], "format": "codex-json"},
    "claude-code": {"argv": ["claude", "-p", "--output-format", "stream-json", "--verbose"],
                    "format": "claude-stream-json",
                    "permissions": {"edit": ["--permission-mode", "acceptEdits"],
                                    "full": ["--permission-mode", "bypassPermissions"]}},
}
"""Workspace profiles that replace the built-ins without what those give every job (gemini's trust variable,
codex's --skip-git-repo-check, claude's IS_SANDBOX at full): what the checks find missing then."""


def bare_profiles(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir(exist_ok=True)
    (ws.root / ".mam" / "profiles.json").write_text(json.dumps(BARE_PROFILES))


async def test_the_built_in_gemini_and_codex_profiles_run_in_an_untrusted_folder_outside_git(ws: WorkspacePaths) -> None:
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini", "codex"))
    _, report, _ = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.gemini.workspace"] == {"name": "agent.gemini.workspace", "status": "ok",
                                                "detail": f"{ws.root}: GEMINI_CLI_TRUST_WORKSPACE=true", "fix": None}
    assert checks["agent.codex.workspace"]["status"] == "ok" and "--skip-git-repo-check" in checks["agent.codex.workspace"]["detail"]


@pytest.mark.slow
async def test_gemini_needs_a_trusted_folder_and_codex_a_git_repository(ws: WorkspacePaths) -> None:
    bare_profiles(ws)
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini", "codex"))
    _, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)  # not asked for: warnings
    checks = by_name(report)
    assert checks["agent.gemini.workspace"]["status"] == "warn" and checks["agent.codex.workspace"]["status"] == "warn"
    code, report, text = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.gemini.workspace"]["status"] == "fail" and "not trusted" in checks["agent.gemini.workspace"]["detail"]
    assert "--skip-trust" in fix_under(text, "agent.gemini.workspace")
    assert checks["agent.codex.workspace"]["status"] == "fail"
    assert fix_under(text, "agent.codex.workspace").startswith(f"git init {ws.root} and commit once")

    (Path(env["HOME"]) / ".gemini").mkdir(exist_ok=True)  # the real gemini made it, answering --version
    (Path(env["HOME"]) / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(ws.root): "TRUST_FOLDER"}))
    git = {**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(ws.root)], check=True, env=git)
    subprocess.run(["git", "-C", str(ws.root), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=git)
    _, report, _ = await doctor(ws, env, "--agent", "gemini", "--agent", "codex", "--worktree", "--broker", DEAD_BROKER)
    checks = by_name(report)
    assert checks["agent.gemini.workspace"]["status"] == "ok" and "TRUST_FOLDER" in checks["agent.gemini.workspace"]["detail"]
    assert checks["agent.codex.workspace"] == {"name": "agent.codex.workspace", "status": "ok",
                                               "detail": f"{ws.root}: a git work tree", "fix": None}
    assert checks["workspace.git"]["status"] == "ok"


async def test_a_worktree_runner_needs_a_git_repository(ws: WorkspacePaths) -> None:
    code, report, text = await doctor(ws, doctor_env(ws, agents_path(ws.root.parent)), "--worktree",
                                      "--broker", DEAD_BROKER)
    git = by_name(report)["workspace.git"]
    assert code == 1 and git["status"] == "fail" and "--worktree" in git["detail"]
    assert fix_under(text, "workspace.git") == f"git init {ws.root} and commit once, or run without --worktree"


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


async def test_json_lists_every_check_in_a_stable_order_each_failure_with_a_fix(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text(json.dumps({
        "reviewer": {"argv": ["no-such-reviewer", "--strict"]}, "claude": {"alias": "claude-code"}}))
    env = doctor_env(ws, agents_path(ws.root.parent, "claude"))
    code, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    profiles = ("claude-code", "codex", "gemini", "aider", "shell", "reviewer")  # built-ins, then the workspace's
    assert [c["name"] for c in report["checks"]] == [
        *WORKSPACE_CHECKS, *(f"agent.{p}.{c}" for p in profiles for c in AGENT_CHECKS)]
    assert report["workspace"] == str(ws.root) and report["ok"] is (code == 0) is False
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "fix"} and check["status"] in ("ok", "warn", "fail", "skip")
        assert check["detail"] and "\n" not in check["detail"]
        if check["status"] in ("warn", "fail"):
            assert check["fix"] and "\n" not in check["fix"], check
    assert report["counts"] == {s: sum(c["status"] == s for c in report["checks"]) for s in ("ok", "warn", "fail", "skip")}
    assert by_name(report)["agent.reviewer.cli"]["fix"] == (
        f"install no-such-reviewer, or change the profile's argv in {ws.root / '.mam' / 'profiles.json'}")


async def test_a_broken_profiles_file_fails_with_the_reason_and_no_agent_is_checked(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text('{"reviewer": {"argv": "not a list"}}')
    code, report, text = await doctor(ws, doctor_env(ws, agents_path(ws.root.parent)), "--broker", DEAD_BROKER)
    profiles = by_name(report)["workspace.profiles"]
    assert code == 1 and profiles["status"] == "fail" and "profiles.json" in profiles["detail"]
    assert fix_under(text, "workspace.profiles").startswith(f"fix {ws.root / '.mam' / 'profiles.json'}")
    assert not [c for c in report["checks"] if c["name"].startswith("agent.")]


async def test_mam_agent_refuses_a_missing_cli_in_one_line_with_its_install_line(ws: WorkspacePaths) -> None:
    result = await run([str(BIN / "mam-agent"), "--agent", "gemini", "--workspace", str(ws.root), "--broker",
                        DEAD_BROKER], cwd=ws.elsewhere, env=doctor_env(ws, agents_path(ws.root.parent, "claude")))
    assert result.returncode == 2
    assert result.stderr.decode() == ("mam-agent: error: --agent gemini: command 'gemini' is not on PATH; install Gemini "
                                      "CLI 0.61.0 (npm install -g @google/gemini-cli@0.61.0), or pass --command/--profile\n")


async def test_mam_agent_reports_its_checks_at_start_and_serves(ws: WorkspacePaths) -> None:
    port = free_port()
    bare_profiles(ws)  # a gemini profile without the trust variable: the folder is untrusted
    env = doctor_env(ws, agents_path(ws.root.parent, "gemini"))
    async with up_process(ws.root, ws.elsewhere, port):
        runner = Daemon([str(BIN / "mam-agent"), "--agent", "gemini", "--workspace", str(ws.root), "--broker",
                         f"mqtt://127.0.0.1:{port}"], cwd=ws.elsewhere, env=env, log=ws.root.parent / "runner.log")
        try:
            output = await runner.wait_for_output("serving", timeout=30)
        finally:
            runner.stop()
    doctor_lines = [line for line in output.splitlines() if "doctor:" in line]
    assert [line.split()[2] for line in doctor_lines] == ["agent.gemini.credentials", "agent.gemini.workspace"]
    assert doctor_lines[1].startswith(f"mam-agent: doctor: agent.gemini.workspace fail: {ws.root}: not trusted")
    assert "; fix: add --skip-trust" in doctor_lines[1]


def test_docs_agents_lists_the_tested_versions_of_the_table() -> None:
    page = (CHECKOUT / "docs" / "agents.md").read_text(encoding="utf-8")
    for program, cli in KNOWN.items():
        row = next((line for line in page.splitlines() if line.startswith(f"| {cli.title} | `{program}` |")), None)
        assert row is not None, f"docs/agents.md has no row for {cli.title}"
        assert f"| {', '.join(cli.tested)} |" in row and f"`{cli.install}`" in row, row
