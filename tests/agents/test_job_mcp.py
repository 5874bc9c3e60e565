"""How a runner gives a job's CLI mam's MCP server (agents/job_mcp.py): the files, arguments and variables each
wiring makes, read back the way the CLI reads them (JSON, TOML), and what it does with a user's own settings.
The real CLIs taking them: tests/real_agents/test_real_delegation.py."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.agents.job_mcp import give_mam

from workspace_support import WorkspacePaths

pytestmark = pytest.mark.fast

CODEX = ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "resume", "S1", "-"]


def job_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A job's environment with a `mam` on its PATH (a link to an executable, as the runner's own is)."""
    bin_dir = tmp / "own-mam"
    bin_dir.mkdir(exist_ok=True)
    mam = bin_dir / "mam"
    if not mam.exists():
        mam.write_text("#!/bin/sh\n")
        mam.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "MAM_JOB_ID": "job-1",
        "MAM_WORKSPACE": "ws-1",
        "WORKSPACE_ROOT": str(tmp),
        "MAM_BROKER_URL": "mqtt://job:pw@127.0.0.1:1",
        "MAM_PROMPT": "a long prompt",
        "SECRET_ELSEWHERE": "x",
        **extra,
    }


def test_claude_gets_a_private_config_with_the_job_s_variables_and_mam_s_tools_allowed(ws: WorkspacePaths) -> None:
    env = job_env(ws.root.parent)
    wired = give_mam("claude-code", ["claude", "-p"], env, job_id="job-1", workspace_root=ws.root)
    assert wired.argv[:2] == ["claude", "-p"] and wired.argv[-2:] == ["--allowedTools", "mcp__mam"]
    config = Path(wired.argv[wired.argv.index("--mcp-config") + 1])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert not config.is_relative_to(ws.root)
    server = json.loads(config.read_text())["mcpServers"]["mam"]
    assert server["alwaysLoad"] is True and server["args"] == ["mcp", "--workspace", str(ws.root)]
    assert server["command"] == str(ws.root.parent / "own-mam" / "mam")
    assert server["env"] == {k: env[k] for k in ("MAM_JOB_ID", "MAM_WORKSPACE", "WORKSPACE_ROOT", "MAM_BROKER_URL")}
    wired.clean_up()
    assert not config.parent.exists()


def test_codex_gets_overrides_after_exec_that_parse_as_toml_and_name_no_credential(ws: WorkspacePaths) -> None:
    env = job_env(ws.root.parent)
    wired = give_mam("codex", CODEX, env, job_id="job-1", workspace_root=ws.root)
    assert wired.place is None and wired.env == env
    assert wired.argv[:2] == ["codex", "exec"] and wired.argv[-3:] == ["resume", "S1", "-"]
    overrides = [wired.argv[i + 1] for i, arg in enumerate(wired.argv) if arg == "-c"]
    table = tomllib.loads("\n".join(overrides))["mcp_servers"]["mam"]
    assert table["default_tools_approval_mode"] == "approve"
    assert table["env_vars"] == ["MAM_BROKER_URL", "MAM_JOB_ID", "MAM_WORKSPACE", "WORKSPACE_ROOT"]
    assert "pw" not in " ".join(wired.argv)  # the login is passed by name, never on the command line


def test_gemini_gets_a_home_of_its_own_with_the_user_s_settings_and_links_to_the_rest(ws: WorkspacePaths) -> None:
    env = job_env(ws.root.parent)
    own = Path(env["HOME"]) / ".gemini"
    own.mkdir(parents=True)
    mine = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"other": {"command": "x"}}}
    (own / "settings.json").write_text(json.dumps(mine))
    (own / "oauth_creds.json").write_text("{}")
    wired = give_mam("gemini", ["gemini"], env, job_id="job-1", workspace_root=ws.root)
    home = Path(wired.env["GEMINI_CLI_HOME"]) / ".gemini"
    settings_ = json.loads((home / "settings.json").read_text())
    assert settings_["security"] == mine["security"] and settings_["mcpServers"]["other"] == {"command": "x"}
    assert settings_["mcpServers"]["mam"]["trust"] is True
    assert (home / "oauth_creds.json").resolve() == (own / "oauth_creds.json").resolve()
    assert (home / "tmp").resolve() == (own / "tmp").resolve() and (own / "tmp").is_dir()  # sessions outlive the job
    assert json.loads((own / "settings.json").read_text()) == mine  # the user's own file is untouched
    wired.clean_up()
    assert not home.exists() and (own / "oauth_creds.json").exists()


def test_a_profile_without_wiring_or_a_job_without_mam_is_left_as_it_is(ws: WorkspacePaths) -> None:
    env = job_env(ws.root.parent)
    assert give_mam(None, ["sh", "-s"], env, job_id="j", workspace_root=ws.root).argv == ["sh", "-s"]
    bare = env | {"PATH": "/nonexistent"}
    wired = give_mam("claude-code", ["claude", "-p"], bare, job_id="j", workspace_root=ws.root)
    assert (wired.argv, wired.env, wired.place) == (["claude", "-p"], bare, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
            max_leaves=8,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_any_user_settings_file_gives_gemini_the_server_or_leaves_the_job_as_it_was(
    ws: WorkspacePaths, content: bytes
) -> None:
    """A settings file that is not a JSON object (comments, a list, bytes) is not rewritten: the job runs with the
    user's own home, without mam's server, and a warning says why; never a crash."""
    env = job_env(ws.root.parent)
    own = Path(env["HOME"]) / ".gemini"
    own.mkdir(parents=True, exist_ok=True)
    (own / "settings.json").write_bytes(content)
    wired = give_mam("gemini", ["gemini"], env, job_id="job-1", workspace_root=ws.root)
    try:
        if wired.place is None:
            assert wired.env == env
        else:
            job_settings = json.loads((wired.place / ".gemini" / "settings.json").read_text())
            assert job_settings["mcpServers"]["mam"]["trust"] is True
        assert (own / "settings.json").read_bytes() == content
    finally:
        wired.clean_up()
    assert os.listdir(own)  # nothing of the user's removed
