"""Trees build themselves from any face: inside a job, `mam submit` and `Publisher.submit` default the
parent to `$MAM_JOB_ID` (the runner sets it), so a tree delegated through an agent's shell is one tree."""

from __future__ import annotations

import pytest
from runner_support import agent_runner, mock_command, submit

from mam.agents.inside_job import default_parent
from mam.contract.errors import UsageError

from brokers import free_port
from e2e import up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


@pytest.mark.fast
def test_the_parent_is_the_one_given_else_the_enclosing_job_unless_a_root_is_asked_for() -> None:
    inside = {"MAM_JOB_ID": "job-outer"}
    assert default_parent(None, env=inside) == "job-outer"
    assert default_parent("job-x", env=inside) == "job-x", "an explicit parent wins"
    assert default_parent(None, no_parent=True, env=inside) is None
    assert default_parent(None, env={}) is None and default_parent(None, env={"MAM_JOB_ID": ""}) is None
    with pytest.raises(UsageError, match=r"MAM_JOB_ID='a b' is not a job id"):
        default_parent(None, env={"MAM_JOB_ID": "a b"})


def _script(workspace: str) -> str:
    """The parent job: three children through `mam submit` as an agent's shell tool would run it, one root
    (`--no-parent`), then it stays running."""
    submit_child = f"{BIN / 'mam'} submit --agent mock --prompt hang --workspace {workspace}"
    return "\n".join(
        [
            *(f"{submit_child} --job-id child-{n} || exit 1" for n in range(3)),
            f"{submit_child} --job-id a-root --no-parent || exit 1",
            "sleep 60",
        ]
    )


async def test_children_submitted_from_a_shell_job_are_its_tree_and_cancel_tree_ends_them(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    children = [f"child-{n}" for n in range(3)]
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="sh", env=child_env(MAM_BROKER_URL=url)),
        agent_runner(url, ws, *mock_command(), "--concurrency", "4", name="hanger"),
    ):
        await submit(url, ws, "parent", _script(str(ws.root)), agent="shell")
        for job in [*children, "a-root"]:
            running = await wait_for_state(url, ws_id, job, lambda r: r["status"] == "running", timeout=30)
            assert running["parent"] == (None if job == "a-root" else "parent"), running
        cancel = await run(
            mam("cancel", "parent", "--tree", "--wait", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout.decode().splitlines() == [f"{job} cancelled" for job in ["parent", *children]]
        for job in children:
            ended = await wait_for_state(url, ws_id, job, lambda r: r["status"] == "cancelled", timeout=30)
            assert ended["cancel_reason"] == "cancelled with tree of parent", ended
        root = await wait_for_state(url, ws_id, "a-root")
    assert root["status"] == "running", "--no-parent made a root: the parent's tree does not reach it"
