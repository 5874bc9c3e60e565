"""Gathering (issue 41): a job working in a worktree delegates children, which start from its branch, and
lands their work on its own branch, from inside the job (`mam merge CHILD`, and the MCP `land_job` with its
`MAM_JOB_ID`); the person's checkout moves only when the person lands the parent (`mam merge PARENT`).

Real git, a real `mam up`, a real `mam-agent --worktree` running shell agents (`sh -s`: the prompt is the
script), the jobs' own `mam submit/wait/merge/ask` through the broker, and `mam mcp` through the official
`mcp` SDK client.
"""

from __future__ import annotations

import subprocess

import anyio
import pytest
from gathering_support import commit_script, gathering_rig, no_identity, worktree_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from landing_support import has_branch, mam_cli, user_repo
from mcp_support import call, mcp_session, refused
from runner_support import submit
from worktrees_support import checkout_state, git, make_repo

from e2e import workspace_id
from support import CHECKOUT, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

DONE = ("succeeded", "failed", "cancelled", "timed_out", "lost")
NEW_TOOLS = {"job_diff": {"job", "stat_only", "max_bytes"}, "land_job": {"job", "squash"}, "drop_job": {"job"}}


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.stderr.count(b"\n") == 1, result.stderr
    return result.stderr.decode()


async def inside(ws: WorkspacePaths, job: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """A `mam` command as the agent of `job` runs it: `MAM_JOB_ID` set, its cwd its worktree (a job run without
    one: the workspace's root)."""
    tree = ws.root / ".mam" / "worktrees" / job
    return await run(
        mam(*args, "--workspace", str(ws.root)), cwd=tree if tree.is_dir() else ws.root, env=child_env(MAM_JOB_ID=job)
    )


async def test_a_parent_gathers_its_childrens_work_and_the_person_lands_one_branch(ws: WorkspacePaths) -> None:
    make_repo(ws.root)  # no identity in the repository's config: mam's own signs the parent's merge commit
    before = checkout_state(ws.root)
    script = "\n".join(
        [
            "set -e",
            commit_script("p.txt=parent"),
            "mam submit --agent sh --job-id kid-1 --prompt 'cp p.txt seen-1.txt; echo one > one.txt' >/dev/null",
            "mam submit --agent sh --job-id kid-2 --prompt 'cp p.txt seen-2.txt; echo two > two.txt' >/dev/null",
            "mam wait kid-1 kid-2 >/dev/null",
            "mam merge kid-1",  # inside the job: onto its own branch
            "mam ask 'kid-2 is landed?' >/dev/null",  # the test lands kid-2 with land_job meanwhile
        ]
    )
    ws_id = workspace_id(ws.root)
    tree = ws.root / ".mam" / "worktrees" / "parent"
    async with gathering_rig(ws) as url:
        await submit(url, ws, "parent", script, agent="sh")
        await wait_for_state(url, ws_id, "parent", lambda r: r["status"] in ("waiting", *DONE), timeout=90)
        kids = {kid: await wait_for_state(url, ws_id, kid, lambda r: r["status"] in DONE) for kid in ("kid-1", "kid-2")}
        started = git(ws.root, "rev-parse", "mam/parent~1")  # the parent's own commit, before kid-1 landed
        for record in kids.values():
            assert record["status"] == "succeeded", record
            assert record["git_at_submit"]["branch"] == "mam/parent", "submitted from the parent's worktree"
            assert record["git_at_submit"]["commit"] == started == record["git_at_finish"]["base"], record
        assert (tree / "seen-1.txt").read_text() == "parent\n", "the child saw the parent's committed file"
        assert (tree / "one.txt").read_text() == "one\n" and not has_branch(ws.root, "kid-1")
        assert git(tree, "rev-parse", "HEAD") == kids["kid-1"]["git_at_finish"]["commit"], "a fast-forward"
        assert checkout_state(ws.root) == before, "the person's checkout has not moved"

        async with mcp_session(ws, MAM_JOB_ID="parent", **no_identity(ws.root.parent)) as session:
            stat = await call(session, "job_diff", job="kid-2", stat_only=True)
            assert stat["stat"] == "2 files changed, 2 insertions(+)" and "diff" not in stat, stat
            assert {f["path"]: (f["added"], f["deleted"]) for f in stat["files"]} == {
                "seen-2.txt": (1, 0),
                "two.txt": (1, 0),
            }
            shown = await call(session, "job_diff", job="kid-2", max_bytes=64)
            assert shown["cut"] is True and len(shown["diff"].encode()) <= 64, shown
            assert "+two" in (await call(session, "job_diff", job="kid-2"))["diff"]
            landed = await call(session, "land_job", job="kid-2")
        assert landed["into"] == "mam/parent" and landed["head"] == git(tree, "rev-parse", "HEAD"), landed
        assert landed["said"].startswith("merged job kid-2 into mam/parent: merge commit"), landed
        assert git(tree, "log", "-1", "--format=%an <%ae>") == "mam <mam@localhost>", "mam's identity, none set"
        assert (tree / "two.txt").read_text() == "two\n" and not has_branch(ws.root, "kid-2")
        assert checkout_state(ws.root) == before, "the person's checkout has still not moved"

        answered = await run(
            mam("answer", "parent", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert answered.returncode == 0, answered.stderr
        parent = await wait_for_state(url, ws_id, "parent", lambda r: r["status"] in DONE, timeout=30)
    assert parent["status"] == "succeeded", parent
    assert checkout_state(ws.root) == before
    merged = await mam_cli(ws, "merge", "parent")  # the person, outside any job: one branch to land
    assert merged.returncode == 0, merged.stderr
    assert "merged job parent into main: fast-forward" in merged.stdout.decode(), merged.stdout
    assert {
        name: (ws.root / name).read_text() for name in ("p.txt", "seen-1.txt", "one.txt", "seen-2.txt", "two.txt")
    } == {
        "p.txt": "parent\n",
        "seen-1.txt": "parent\n",
        "one.txt": "one\n",
        "seen-2.txt": "parent\n",
        "two.txt": "two\n",
    }
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""


HOSTILE_JOBS = [
    "nope",
    "kid-c",
    "kid-d",
    "kid-p",
    "kid-q",
    "stray",
    "parent",
    "",
    "-D",
    "../x",
    "mam/kid-c",
    "kid",
    "k",
    "a" * 300,
    "kid-c\nx",
    "stray;rm",
]
JOBS = st.one_of(st.sampled_from(HOSTILE_JOBS), st.text(max_size=40), st.integers(), st.none())
ANY = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
ARGUMENTS = st.fixed_dictionaries(
    {"job": JOBS}, optional={"stat_only": ANY, "max_bytes": ANY, "squash": ANY, "full": ANY}
)


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_a_conflict_hostile_jobs_and_arguments_change_nothing_and_drop_discards(ws: WorkspacePaths) -> None:
    user_repo(ws.root)
    script = "\n".join(
        [
            "set -e",
            commit_script("clash.txt=base"),
            "mam submit --agent sh --job-id kid-c --prompt 'echo child > clash.txt' >/dev/null",
            "mam submit --agent sh --job-id kid-d --prompt 'echo dropped > d.txt' >/dev/null",
            "mam submit --agent plain --job-id kid-p --prompt 'true' >/dev/null",
            "mam submit --agent nobody --job-id kid-q --prompt 'never runs' >/dev/null 2>&1",
            "mam wait kid-c kid-d kid-p >/dev/null",
            commit_script("clash.txt=parent"),  # the parent changes the same file after kid-c started
            "mam ask 'gathered?' >/dev/null",
        ]
    )
    ws_id = workspace_id(ws.root)
    tree = ws.root / ".mam" / "worktrees" / "parent"
    async with gathering_rig(ws, plain=True) as url:
        await submit(url, ws, "stray", "echo stray > stray.txt", agent="sh")  # a root job: no one's child
        await submit(url, ws, "loose", "echo loose > loose.txt", agent="sh")  # another, landed from outside
        await submit(url, ws, "parent", script, agent="sh")
        await wait_for_state(url, ws_id, "parent", lambda r: r["status"] in ("waiting", *DONE), timeout=90)
        assert (await wait_for_state(url, ws_id, "stray", lambda r: r["status"] in DONE))["status"] == "succeeded"
        checkout = checkout_state(ws.root)
        parent_tree = worktree_state(tree)

        async with mcp_session(ws, MAM_JOB_ID="parent") as session:
            conflict = await refused(session, "land_job", job="kid-c")
            assert "job kid-c conflicts with mam/parent in clash.txt: nothing was changed" in conflict, conflict
            assert worktree_state(tree) == parent_tree and has_branch(ws.root, "kid-c")
            by_cli = await inside(ws, "parent", "merge", "kid-c")
            assert by_cli.returncode == 1 and "conflicts with mam/parent in clash.txt" in one_line(by_cli)
            assert worktree_state(tree) == parent_tree and checkout_state(ws.root) == checkout

            refusals = {
                ("land_job", "nope"): "no job 'nope'",
                ("land_job", "kid-p"): "job kid-p did not run in a worktree of its own",
                ("land_job", "kid-q"): "job kid-q is submitted: its work is on branch mam/kid-q once it ends",
                ("land_job", "stray"): "job stray is not in the delegation tree of job parent",
                ("drop_job", "stray"): "job stray is not in the delegation tree of job parent",
                ("land_job", "parent"): "job parent is the job this runs inside (MAM_JOB_ID): it cannot land",
                ("job_diff", "kid-q"): "job kid-q is submitted",
                ("job_diff", "kid-p"): "job kid-p did not run in a worktree of its own",
            }
            for (tool, job), expected in refusals.items():
                text = await refused(session, tool, job=job)
                assert expected in text and "\n" not in text, (tool, job, text)
            assert "max_bytes: 0 is out of range: give 1 to" in await refused(
                session, "job_diff", job="kid-c", max_bytes=0
            )
            assert (await call(session, "job_diff", job="stray"))["files"] == [
                {"path": "stray.txt", "added": 1, "deleted": 0}
            ], "a diff is a read: any job's"

            dropped = await call(session, "drop_job", job="kid-d")
            assert dropped["said"].startswith("discarded job kid-d: removed its branch mam/kid-d"), dropped
            assert not has_branch(ws.root, "kid-d")
            assert "job kid-d's branch mam/kid-d is gone" in await refused(session, "job_diff", job="kid-d")

            @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(tool=st.sampled_from(["job_diff", "land_job", "drop_job"]), arguments=ARGUMENTS)
            def hostile(tool: str, arguments: dict) -> None:
                result = anyio.from_thread.run(session.call_tool, tool, arguments)
                text = " ".join(getattr(block, "text", "") for block in result.content)
                if result.is_error:
                    assert text and "\n" not in text, (tool, arguments, text)
                else:  # only reads, or dropping a child of the parent's (kid-c): never a landing here
                    assert tool != "land_job", (arguments, text)
                    assert result.structured_content is not None, text

            await anyio.to_thread.run_sync(hostile)
            assert await call(session, "job_diff", job="stray"), "the server still serves"
        assert worktree_state(tree) == parent_tree and checkout_state(ws.root) == checkout
        by_cli = await inside(ws, "parent", "discard", "stray")
        assert by_cli.returncode == 1 and "job stray is not in the delegation tree of job parent" in one_line(by_cli)
        assert has_branch(ws.root, "stray"), "another tree's job is not the parent's to drop (MCP nor mam discard)"

        alone = await inside(ws, "kid-q", "merge", "stray")  # a job with no worktree of its own
        assert alone.returncode == 1, alone
        line = one_line(alone)
        assert "job kid-q, the job this runs inside (MAM_JOB_ID), has no worktree of its own" in line, line
        assert "`mam merge --into-checkout stray` lands it there on purpose" in line
        assert checkout_state(ws.root) == checkout
        on_purpose = await inside(ws, "kid-q", "merge", "--into-checkout", "stray")
        assert on_purpose.returncode == 0 and b"merged job stray into main" in on_purpose.stdout, on_purpose
        assert (ws.root / "stray.txt").read_text() == "stray\n"
        await wait_for_state(url, ws_id, "loose", lambda r: r["status"] in DONE)
        async with mcp_session(ws) as outside:  # no MAM_JOB_ID: the person's server lands in the checkout
            landed = await call(outside, "land_job", job="loose")
        assert landed["into"] == "main" and landed["head"] == git(ws.root, "rev-parse", "HEAD"), landed
        assert (ws.root / "loose.txt").read_text() == "loose\n" and not has_branch(ws.root, "loose")

        answered = await run(
            mam("answer", "parent", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert answered.returncode == 0, answered.stderr
        assert (await wait_for_state(url, ws_id, "parent", lambda r: r["status"] in DONE))["status"] == "succeeded"
    merged = await mam_cli(ws, "merge", "parent")
    assert merged.returncode == 0 and b"merged job parent into main" in merged.stdout, merged
    assert (ws.root / "clash.txt").read_text() == "parent\n"


async def test_the_tools_are_listed_and_documented_with_their_arguments(ws: WorkspacePaths) -> None:
    table = (CHECKOUT / "docs" / "mcp.md").read_text()
    async with mcp_session(ws) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        for name, arguments in NEW_TOOLS.items():
            assert set(tools[name].input_schema["properties"]) == arguments, name
            assert tools[name].input_schema["required"] == ["job"] and tools[name].output_schema is not None
            assert f"| `{name}` |" in table and all(f"`{argument}`" in table for argument in arguments), name
        assert tools["job_diff"].input_schema["properties"]["max_bytes"]["maximum"] == 1024 * 1024
        assert "no job 'nope'" in await refused(session, "land_job", job="nope"), "outside a job too"
        assert "invalid job id '../x'" in await refused(session, "drop_job", job="../x")
