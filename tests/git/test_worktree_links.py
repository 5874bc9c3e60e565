"""Links an earlier job plants under `.mam/worktrees/` never steer a later job's worktree outside the workspace.

A real `mam up` and a real `mam-agent --agent sh --worktree` on a git workspace;
the first job plants the links (as any job could: it runs as the user).
"""

from __future__ import annotations

import os
from pathlib import Path

from runner_support import submit
from worktrees_support import git, make_repo, served

from e2e import workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths


def listing(top: Path) -> dict[str, str]:
    """Every name under `top` (links not followed) and its content or kind."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            found[str(path.relative_to(top))] = "dir" if path.is_dir() else path.read_text()
    return found


async def test_planted_links_in_worktrees_fail_the_job_naming_the_path_and_nothing_outside_changes(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    outside = tmp_path / "outside"
    (outside / "empty").mkdir(parents=True)
    (outside / "precious").mkdir()
    (outside / "precious" / "keep.txt").write_text("the user's\n")
    before = listing(outside)
    trees = ws.root / ".mam" / "worktrees"

    def done(record: dict) -> bool:
        return record["status"] in ("succeeded", "failed")

    plant = f"cd {trees} && rm .gitignore && ln -s {outside}/written .gitignore && ln -s {outside}/empty job-next"
    # job-swap replaces its own worktree with a link to a directory holding the user's files
    swap = f"cd {trees} && mv job-swap moved-away && ln -s {outside}/precious job-swap"
    async with served(ws, ("sh", ())) as url:
        await submit(url, ws, "job-plant", plant, agent="sh")
        planted = await wait_for_state(url, ws_id, "job-plant", done, timeout=60)
        assert planted["status"] == "succeeded", planted
        assert (trees / ".gitignore").is_symlink() and (trees / "job-next").is_symlink()

        await submit(url, ws, "job-after", "echo hi > new.txt", agent="sh")
        after = await wait_for_state(url, ws_id, "job-after", done, timeout=60)
        assert after["status"] == "failed", after
        assert f"symlink at {trees / '.gitignore'}" in after["error"], after["error"]

        (trees / ".gitignore").unlink()  # the user removes the first link; the second still stands
        await submit(url, ws, "job-next", "echo hi > new.txt", agent="sh")
        steered = await wait_for_state(url, ws_id, "job-next", done, timeout=60)
        assert steered["status"] == "failed", steered
        assert f"{trees / 'job-next'} already exists (a symlink to {outside}/empty)" in steered["error"]

        await submit(url, ws, "job-swap", swap, agent="sh")
        swapped = await wait_for_state(url, ws_id, "job-swap", done, timeout=60)

        await submit(url, ws, "job-ok", "echo fine > ok.txt", agent="sh")
        ok = await wait_for_state(url, ws_id, "job-ok", done, timeout=60)
    assert listing(outside) == before, "nothing outside the workspace was written or deleted"
    assert swapped["status"] == "succeeded" and swapped.get("git_at_finish") is None, swapped
    assert (trees / "job-swap").is_symlink(), "a worktree swapped for a link is neither saved nor removed"
    assert "mam/job-next" not in git(ws.root, "branch", "--list"), "a refused worktree makes no branch"
    assert ok["status"] == "succeeded" and git(ws.root, "show", "mam/job-ok:ok.txt") == "fine"
    assert not (trees / "job-ok").exists(), "the runner still removes the worktrees it made"
    assert (trees / ".gitignore").read_text() == "*\n" and not (trees / ".gitignore").is_symlink()
