"""`mam doctor` against a real `mam up`: the workspace's and the broker's checks, the checklist, its fix lines, its
exit code and its `--json` (the agent CLIs' checks and `mam-agent` at start: test_doctor_agents.py). The real agent
CLIs (tests/agent_clis.py) on a PATH made for each test, with only the ones a test names (others may be installed on
this machine, and must not be found)."""

from __future__ import annotations

import json
import os

from doctor_support import AGENT_CHECKS, SECRET, WORKSPACE_CHECKS, agents_path, by_name, doctor, doctor_env, fix_under

from mam.agents.tested_clis import KNOWN

from brokers import free_port
from e2e import up_process
from support import DEAD_BROKER
from workspace_support import WorkspacePaths


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
        "name": "agent.claude-code.version",
        "status": "ok",
        "detail": "Claude Code 2.1.197: tested with mam",
        "fix": None,
    }
    assert checks["agent.claude-code.credentials"]["detail"] == "ANTHROPIC_API_KEY is set"
    for absent in ("codex", "gemini", "aider"):
        cli = checks[f"agent.{absent}.cli"]
        assert cli["status"] == "skip" and cli["detail"].startswith("not installed"), cli
        assert cli["fix"] == f"install {KNOWN[absent].title}: {KNOWN[absent].install}"
        assert {checks[f"agent.{absent}.{c}"]["status"] for c in AGENT_CHECKS[1:]} == {"skip"}
    assert "skip  agent.gemini.cli" in text and "agent.gemini.version" not in text, "the text shows what matters"
    counted = report["counts"]
    assert counted["fail"] == counted["warn"] == 0
    assert (
        text.splitlines()[-1]
        == f"0 failed, 0 warnings, {counted['ok']} ok, {counted['skip']} skipped: mam will work here"
    )
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
    assert fix_under(text, "broker.reachable").startswith(
        f"start the workspace's broker and projector: mam up --workspace {ws.root}"
    )
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


async def test_a_worktree_runner_needs_a_git_repository(ws: WorkspacePaths) -> None:
    code, report, text = await doctor(
        ws, doctor_env(ws, agents_path(ws.root.parent)), "--worktree", "--broker", DEAD_BROKER
    )
    git = by_name(report)["workspace.git"]
    assert code == 1 and git["status"] == "fail" and "--worktree" in git["detail"]
    assert fix_under(text, "workspace.git") == f"git init {ws.root} and commit once, or run without --worktree"


async def test_json_lists_every_check_in_a_stable_order_each_failure_with_a_fix(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text(
        json.dumps({"reviewer": {"argv": ["no-such-reviewer", "--strict"]}, "claude": {"alias": "claude-code"}})
    )
    env = doctor_env(ws, agents_path(ws.root.parent, "claude"))
    code, report, _ = await doctor(ws, env, "--broker", DEAD_BROKER)
    profiles = ("claude-code", "codex", "gemini", "aider", "shell", "reviewer")  # built-ins, then the workspace's
    assert [c["name"] for c in report["checks"]] == [
        *WORKSPACE_CHECKS,
        *(f"agent.{p}.{c}" for p in profiles for c in AGENT_CHECKS),
    ]
    assert report["workspace"] == str(ws.root) and report["ok"] is (code == 0) is False
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "fix"} and check["status"] in ("ok", "warn", "fail", "skip")
        assert check["detail"] and "\n" not in check["detail"]
        if check["status"] in ("warn", "fail"):
            assert check["fix"] and "\n" not in check["fix"], check
    assert report["counts"] == {
        s: sum(c["status"] == s for c in report["checks"]) for s in ("ok", "warn", "fail", "skip")
    }
    assert by_name(report)["agent.reviewer.cli"]["fix"] == (
        f"install no-such-reviewer, or change the profile's argv in {ws.root / '.mam' / 'profiles.json'}"
    )


async def test_a_broken_profiles_file_fails_with_the_reason_and_no_agent_is_checked(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text('{"reviewer": {"argv": "not a list"}}')
    code, report, text = await doctor(ws, doctor_env(ws, agents_path(ws.root.parent)), "--broker", DEAD_BROKER)
    profiles = by_name(report)["workspace.profiles"]
    assert code == 1 and profiles["status"] == "fail" and "profiles.json" in profiles["detail"]
    assert fix_under(text, "workspace.profiles").startswith(f"fix {ws.root / '.mam' / 'profiles.json'}")
    assert not [c for c in report["checks"] if c["name"].startswith("agent.")]
