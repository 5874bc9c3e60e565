"""`job_diff`, `land_job`, `drop_job`: `mam diff`, `mam merge` and `mam discard` as tools (`mam.git.landing`).

An orchestrating agent sees a child's work against where it started, lands
it, or drops it. Inside a job (`MAM_JOB_ID`, read when the server starts) a
child lands on that job's own branch in its worktree, never in the person's
checkout, and only a job of its own delegation tree lands or is dropped
(`mam.git.gathering`); outside any job they act as the CLI does. None needs a
broker: the registry and git are read and changed here, so the server runs on
the workspace's machine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Final, NotRequired, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.contract.errors import MamError
from mam.git.gathering import check_in_tree, landing_into
from mam.git.job_tree import git
from mam.git.landing import JobWork, diff_files, diff_text, discard, job_work
from mam.git.merging import merge
from mam.git.run import GitError
from mam.mcp_server.served import JobRef, Served, reported
from mam.registry.reading import read_record_or_pruned

DEFAULT_DIFF: Final = 32 * 1024
MOST_DIFF: Final = 1024 * 1024

StatOnly = Annotated[bool, Field(description="only the diffstat and the files changed, no diff text")]
MaxBytes = Annotated[
    int,
    Field(
        ge=1,
        le=MOST_DIFF,
        description="at most this many bytes of the diff, whole lines "
        "(`cut` then says the rest was left out: `mam diff JOB` has it all)",
    ),
]
Squash = Annotated[bool, Field(description="one new commit holding the change instead of a merge")]

T = TypeVar("T")

_ONE_AT_A_TIME = threading.Lock()
"""One land or drop at a time from this server: each changes a branch, a worktree, or the checkout."""


class FileChange(TypedDict):
    path: str
    added: int | None
    """Lines added; null for a binary file."""
    deleted: int | None


class Diff(TypedDict):
    """A job's change against the commit it started from (`git diff BASE mam/<job>`)."""

    job_id: str
    base: str
    """The commit the job started from."""
    tip: str
    """The head of its branch (the base itself when it changed nothing)."""
    stat: str
    """`2 files changed, 3 insertions(+)`; empty when it changed nothing."""
    files: list[FileChange]
    diff: NotRequired[str]
    """The diff, cut to max_bytes (absent with stat_only)."""
    cut: NotRequired[bool]


class Landed(TypedDict):
    """Where the job's branch landed, and git's head there now."""

    job_id: str
    into: str
    """The branch it landed on: the calling job's own `mam/<job>` inside a job, else the checkout's."""
    head: str
    said: str
    """mam merge's line: fast-forward or merge commit, and what became of the job's branch."""


class Dropped(TypedDict):
    job_id: str
    said: str


def _diff(work: JobWork, stat_only: bool, max_bytes: int) -> Diff:
    if work.tip() is None and work.empty:
        answer = Diff(job_id=work.job_id, base=work.base, tip=work.base, stat="", files=[])
        text: dict[str, object] = {"diff": "", "cut": False}
    else:
        text = diff_text(work, max_bytes)
        answer = Diff(
            job_id=work.job_id,
            base=work.base,
            tip=str(text["tip"]),
            stat=str(text["stat"]),
            files=[FileChange(path=path, added=added, deleted=deleted) for path, added, deleted in diff_files(work)],
        )
    if not stat_only:
        answer["diff"] = str(text["diff"])
        answer["cut"] = bool(text["cut"])
    return answer


async def _in_thread(call: Callable[[], T]) -> T:
    """`call` in a worker thread; a git command that failed or hung is the tool's one-line error."""
    try:
        return await anyio.to_thread.run_sync(call)
    except GitError as exc:
        raise MamError(str(exc)) from None


def register(app: MCPServer, served: Served) -> None:
    workspace = served.workspace

    def work(job_id: str) -> JobWork:
        return job_work(workspace.root, read_record_or_pruned(workspace, job_id))  # a branch may outlive its record

    @app.tool()
    @reported
    async def job_diff(job: JobRef, stat_only: StatOnly = False, max_bytes: MaxBytes = DEFAULT_DIFF) -> Diff:
        """A finished worktree job's change against the commit it started from (`mam diff`): the diffstat, the
        files changed with their line counts, and the diff cut to max_bytes of whole lines. A child of a job
        working in a worktree started from that job's branch, so this is exactly what landing it would add."""
        job_id = await served.job_id(job)
        return await _in_thread(lambda: _diff(work(job_id), stat_only, max_bytes))

    @app.tool()
    @reported
    async def land_job(job: JobRef, squash: Squash = False) -> Landed:
        """Land a finished worktree job's branch (`mam merge`): fast-forward when possible, else a merge commit;
        then its branch and worktree go. Inside a job (MAM_JOB_ID) it lands on that job's own branch, in its
        worktree (a person later lands that one branch), and only a job it delegated (or one below those); inside
        a job without a worktree it is refused. A conflict is refused naming the files, with nothing changed."""
        job_id = await served.job_id_for_write(job, "land")

        def land() -> Landed:
            record = read_record_or_pruned(workspace, job_id)  # an unknown job is named as such first
            into = landing_into(
                workspace, job_id, served.parent, otherwise=f"a person lands it in the checkout: `mam merge {job_id}`"
            )
            found = job_work(workspace.root, record)
            with _ONE_AT_A_TIME:
                said = merge(found, squash=squash, into=into)
            where = into.directory if into is not None else found.top
            return Landed(
                job_id=job_id,
                into=git(where, "symbolic-ref", "--quiet", "--short", "HEAD", check=False),
                head=git(where, "rev-parse", "HEAD"),
                said=said,
            )

        return await _in_thread(land)

    @app.tool()
    @reported
    async def drop_job(job: JobRef) -> Dropped:
        """Drop a finished worktree job's work (`mam discard`): its branch and worktree are removed, uncommitted
        changes in it too; the work is lost. Inside a job (MAM_JOB_ID), only a job it delegated (or one below)."""
        job_id = await served.job_id_for_write(job, "drop")

        def drop() -> Dropped:
            record = read_record_or_pruned(workspace, job_id)
            if served.parent is not None:
                check_in_tree(workspace, job_id, served.parent, "drop")
            found = job_work(workspace.root, record)
            with _ONE_AT_A_TIME:
                return Dropped(job_id=job_id, said=discard(found))

        return await _in_thread(drop)


__all__ = ["register"]
