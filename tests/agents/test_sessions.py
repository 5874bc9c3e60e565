"""`mam session create/list`, from another cwd, landing in the named workspace."""

from __future__ import annotations

import json

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import child_env, mam, run
from workspace_support import WorkspacePaths


async def test_session_created_from_another_cwd_lands_in_the_workspace(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    (ws.root / ".mam" / "roles").mkdir(parents=True)
    (ws.root / ".mam" / "roles" / "reviewer.md").write_text("Review as {role} in {session} for {agent}.\n")
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        by_flag = await run(
            mam(
                "session",
                "create",
                "--agent",
                "claude-code",
                "--role",
                "reviewer",
                "--session",
                "herdr:review",
                "--json",
                "--broker",
                amqtt.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert by_flag.returncode == 0, by_flag.stderr
        env = child_env(WORKSPACE_ROOT=str(ws.root), MAM_BROKER_URL=amqtt.url)
        by_env = await run(
            mam("session", "create", "--agent", "codex", "--role", "builder", "--session", "herdr:build", "--json"),
            cwd=ws.elsewhere,
            env=env,
        )
        assert by_env.returncode == 0, by_env.stderr
    review, build = json.loads(by_flag.stdout), json.loads(by_env.stdout)
    assert review["prompt"] == "Review as reviewer in herdr:review for claude-code.\n"
    assert (review["agent_session"], review["role"], review["labels"]) == (
        "herdr:review",
        "reviewer",
        {"mam.kind": "onboarding"},
    )
    assert "builder agent of session herdr:build" in build["prompt"] and workspace_id(ws.root) in build["prompt"]
    assert (ws.jobs / f"{review['job_id']}.json").is_file() and (ws.jobs / f"{build['job_id']}.json").is_file()
    listed = await run(mam("session", "list", "--json"), cwd=ws.elsewhere, env=child_env(WORKSPACE_ROOT=str(ws.root)))
    found = {s["session"]: s for s in json.loads(listed.stdout)}
    assert found["herdr:review"]["onboarding"] == review["job_id"] and found["herdr:build"]["agent"] == "codex"
