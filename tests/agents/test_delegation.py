"""Delegation guards: depth, fan-out and cycles are refused with a reason; `mam jobs tree`."""

from __future__ import annotations

import json

import pytest

from mam.contract.record import JobRecord, Status
from mam.projector.delegation import DelegationLimits, check

from brokers import RunningBroker
from e2e import projector_process
from support import mam, run
from workspace_support import WorkspacePaths


def record(job_id: str, parent: str | None) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        workspace="w",
        status=Status.SUBMITTED,
        agent="a",
        prompt="p",
        parent=parent,
        submitted_at="t",
        updated_at="t",
    )


@pytest.mark.fast
def test_cycle_depth_and_fanout_rules() -> None:
    jobs = {
        "a": record("a", None),
        "b": record("b", "a"),
        "c": record("c", "b"),
        "x": record("x", "y"),
        "y": record("y", "x"),
    }
    limits = DelegationLimits(max_depth=2, max_children=1)
    assert check("d", "a", jobs.get, 0, limits) is None
    assert "too deep" in (check("d", "c", jobs.get, 0, limits) or "")
    assert "open children" in (check("d", "a", jobs.get, 1, limits) or "")
    assert "cycle" in (check("x2", "x", jobs.get, 0, DelegationLimits()) or "")
    assert "own parent" in (check("a", "a", jobs.get, 0, limits) or "")
    assert "unknown parent" in (check("d", "nope", jobs.get, 0, limits) or "")


async def test_projector_refuses_deep_wide_and_orphan_delegation(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "config.json").write_text(json.dumps({"max_depth": 2, "max_children": 2}))
    async with projector_process(amqtt, ws.root, ws.elsewhere):

        async def submit(job: str, parent: str | None = None) -> tuple[int, str]:
            extra = ["--parent", parent] if parent else []
            result = await run(
                mam(
                    "submit",
                    "--prompt",
                    f"do {job}",
                    "--agent",
                    "a",
                    "--job-id",
                    job,
                    "--wait",
                    "--broker",
                    amqtt.url,
                    "--workspace",
                    str(ws.root),
                    *extra,
                ),
                cwd=ws.elsewhere,
            )
            return result.returncode, result.stderr.decode()

        assert (await submit("root"))[0] == 0
        assert (await submit("child-1", "root"))[0] == 0
        assert (await submit("child-2", "root"))[0] == 0
        code, err = await submit("child-3", "root")
        assert code == 1 and "already has 2 open children; max_children is 2" in err
        assert (await submit("grandchild", "child-1"))[0] == 0
        code, err = await submit("too-deep", "grandchild")
        assert code == 1 and "delegation too deep" in err and "max_depth is 2" in err
        code, err = await submit("orphan", "missing")
        assert code == 1 and "unknown parent job 'missing'" in err
        tree = await run(mam("jobs", "tree", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    lines = tree.stdout.decode().splitlines()
    assert lines[0].startswith("root [submitted]")
    assert any(line.startswith("|-- child-1 [submitted]") for line in lines)
    assert any("`-- grandchild [submitted]" in line for line in lines)
    assert not (ws.jobs / "child-3.json").exists() and not (ws.jobs / "too-deep.json").exists()
