"""A conversation under `mam-agent --worktree`: every resumed job runs in the worktree path of its first job,
where the agent's CLI keeps the session (Claude Code and Gemini CLI keep theirs per directory). Real `mam up`,
`mam-agent` and the real CLIs against their model servers (tests/agent_clis.py; two jobs per CLI, with and without
--worktree: tests/real_agents/test_real_agents_resume.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_rig
from resume_support import done, submit_out
from worktrees_support import git, make_repo

from mam.agents.formats import Transcript, parser_for
from mam.agents.resume import carried
from mam.contract.events import Usage
from mam.contract.record import JobRecord
from mam.git.worktree import WorktreeError, Worktrees

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.anyio


@pytest.mark.timeout(240)  # three jobs of a real CLI
@pytest.mark.parametrize("agent", ["claude-code", "gemini"])
@pytest.mark.slow
async def test_a_conversation_of_three_jobs_runs_in_its_first_jobs_path_and_finds_its_session(
    agent: str, ws: WorkspacePaths
) -> None:
    make_repo(ws.root)
    script = Script([Turn(text="looked"), Turn(text="went on"), Turn(text="went on again")])
    async with real_rig(CLIS[agent], ws, script, "--worktree") as rig:
        assert (await rig.job("c1", "look around", agent=agent))["status"] == "succeeded"
        for job, earlier in (("c2", "c1"), ("c3", "c2")):
            record = await rig.job(job, f"go on as {job}", "--resume", earlier, agent=agent)
            assert record["status"] == "succeeded", record.get("error")
            assert record["resume_root"] == "c1"
    # the session was found each time: the third job's model call carries the whole conversation
    last = next(json.dumps(body) for body in reversed(script.requests) if not body.get("_side"))
    assert "look around" in last and "go on as c2" in last and "go on as c3" in last, last[:2000]
    assert sorted(p.name for p in (ws.root / ".mam" / "worktrees").iterdir()) == [".gitignore"]


@pytest.mark.slow
async def test_a_resume_takes_over_the_kept_worktree_of_the_failed_job_it_continues(ws: WorkspacePaths) -> None:
    """The continued job failed, so its worktree was kept in the conversation's path: the resumed job goes on
    in it, on its own branch (the failed job's branch keeps its work); a second resume of that job while the
    first one still runs there is refused in one line, not run where the session is not."""
    make_repo(ws.root)
    script = Script(
        [
            Turn(tool="Write", args={"file_path": "notes.md", "content": "k1's notes\n"}),
            Turn(status=400, error="bad request"),  # k1 edits, then its API call fails: k1 failed
            Turn(stall=True),
        ]
    )  # k2's call is never answered: it runs until cancelled
    async with real_rig(CLIS["claude-code"], ws, script, "--worktree", "--concurrency", "2") as rig:
        url, ws_id = rig.url, workspace_id(ws.root)
        first = await rig.job("k1", "please edit the notes", agent="claude-code")
        assert first["status"] == "failed", first
        kept = ws.root / ".mam" / "worktrees" / "k1"
        assert kept.is_dir(), "a failed job's worktree is kept"
        code, _, err = await submit_out(url, ws, "--resume", "k1", "--prompt", "now hang", "--job-id", "k2")
        assert code == 0, err
        await wait_for_state(url, ws_id, "k2", lambda r: r["status"] == "running", timeout=JOB_TIMEOUT)
        assert git(kept, "symbolic-ref", "HEAD") == "refs/heads/mam/k2"
        code, _, err = await submit_out(url, ws, "--resume", "k1", "--prompt", "another branch of it", "--job-id", "k3")
        assert code == 0, err
        third = await wait_for_state(url, ws_id, "k3", done, timeout=JOB_TIMEOUT)
        cancelled = await run(mam("cancel", "k2", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert cancelled.returncode == 0, cancelled.stderr
        await wait_for_state(url, ws_id, "k2", done, timeout=JOB_TIMEOUT)
    assert third["status"] == "failed"
    assert third["error"].startswith(
        f"job k3: its conversation's directory {kept} holds a worktree on "
        "refs/heads/mam/k2, not on mam/k1 (the job it continues)"
    ), third["error"]
    assert "\n" not in third["error"]
    assert git(ws.root, "show", "mam/k1:notes.md") == "k1's notes"
    assert git(ws.root, "rev-parse", "mam/k2") == git(ws.root, "rev-parse", "mam/k1")  # it went on from k1's work
    # the path is k2's worktree now (k2 was cancelled: kept): discarding k1 drops k1's branch, not k2's worktree
    dropped = await run(mam("discard", "k1", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert "is on refs/heads/mam/k2, not mam/k1" in dropped.stdout.decode() + dropped.stderr.decode(), dropped
    assert git(kept, "symbolic-ref", "HEAD") == "refs/heads/mam/k2"


def record(**fields: object) -> JobRecord:
    base = {
        "job_id": "j2",
        "workspace": "w",
        "status": "succeeded",
        "agent": "codex",
        "prompt": "p",
        "submitted_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "version": 3,
    }
    return JobRecord(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.fast
def test_a_resume_carries_the_conversations_first_job_and_the_tokens_its_jobs_recorded() -> None:
    first = record(job_id="j1", usage=Usage(input_tokens=100, output_tokens=7, agent_session_id="t"))
    assert carried(first) == {"resume_root": "j1", "resume_usage": Usage(input_tokens=100, output_tokens=7)}
    second = record(
        resume_root="j1",
        resume_usage=Usage(input_tokens=100, output_tokens=7),
        usage=Usage(input_tokens=150, output_tokens=9, cached_input_tokens=20),
    )
    assert carried(second) == {
        "resume_root": "j1",
        "resume_usage": Usage(input_tokens=250, output_tokens=16, cached_input_tokens=20),
    }
    assert carried(record(job_id="plain")) == {"resume_root": "plain"}


@pytest.mark.fast
def test_codex_usage_after_a_resume_is_the_thread_total_less_what_came_before() -> None:
    lines = [
        '{"type":"thread.started","thread_id":"t-1"}',
        '{"type":"turn.completed","usage":{"input_tokens":250,"cached_input_tokens":30,"output_tokens":16}}',
    ]
    transcript = Transcript(parser_for("codex-json"))
    transcript.parser.continues(Usage(input_tokens=100, output_tokens=7, cached_input_tokens=10))
    transcript.feed("".join(line + "\n" for line in lines))
    usage = transcript.parser.outcome().usage
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (150, 20, 9)
    # a total below what came before is the run's own (a codex that did not restore the thread's total)
    low = Transcript(parser_for("codex-json"))
    low.parser.continues(Usage(input_tokens=1000, output_tokens=700))
    low.feed(lines[1] + "\n")
    assert low.parser.outcome().usage.input_tokens == 250  # type: ignore[union-attr]


def test_the_continued_jobs_late_clean_up_leaves_the_worktree_the_resumed_job_took_over(tmp_path: Path) -> None:
    """A job's clean-up runs just after its outcome is recorded; a resume submitted at once may already have
    taken its worktree over: the clean-up must not remove the directory the resumed job now runs in."""
    make_repo(tmp_path)
    trees = Worktrees(tmp_path, tmp_path)
    first = trees.create("r1", None)
    (first.path / "made.txt").write_text("r1\n")
    trees.finish(first)  # commits r1's work to mam/r1; its worktree stays until clean_up
    second = trees.create("r2", None, continues="r1", directory="r1")
    assert second.path == first.path and git(second.path, "symbolic-ref", "HEAD") == "refs/heads/mam/r2"
    assert (second.path / "made.txt").read_text() == "r1\n"
    assert trees.clean_up(first, succeeded=True, saved=True) is False
    assert git(first.path, "symbolic-ref", "HEAD") == "refs/heads/mam/r2"
    (second.path / "more.txt").write_text("r2\n")  # left uncommitted: a third resume of r1 is refused
    with pytest.raises(WorktreeError, match="holds a worktree on refs/heads/mam/r2, not on mam/r1"):
        trees.create("r3", None, continues="r1", directory="r1")
    trees.finish(second)
    assert trees.clean_up(second, succeeded=True, saved=True) is True
    assert not second.path.exists() and git(tmp_path, "show", "mam/r2:more.txt") == "r2"


async def test_a_hand_published_resume_of_an_unfinished_or_unknown_job_is_refused(
    ws: WorkspacePaths, amqtt: RunningBroker
) -> None:
    """A runner acts on `resumes` and `resume_root` (it may take over the continued job's worktree): the
    projector takes them only for a finished job, and `resume_root` only where its conversation began."""
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        await publish(amqtt.url, f"mam/{ws_id}/jobs/live/events", b'{"type":"submitted","prompt":"p","agent":"a"}')
        await wait_for_state(amqtt.url, ws_id, "live")
        cases = [
            (b'"resumes":"live"', "resumes 'live': the job is submitted"),
            (b'"resumes":"nope"', "resumes 'nope': no such job is known"),
            (b'"resume_root":"live"', "resume_root without resumes"),
        ]
        async with Watch(amqtt.url, f"mam/{ws_id}/rejected") as rejected:
            for n, (fields, reason) in enumerate(cases):
                payload = b'{"type":"submitted","prompt":"p","agent":"a",' + fields + b"}"
                await publish(amqtt.url, f"mam/{ws_id}/jobs/r{n}/events", payload)
                refusal = await rejected.json()
                assert reason in refusal["reason"], refusal
    assert sorted(p.name for p in ws.jobs.iterdir() if not p.name.startswith(".")) == ["live.json"]
