"""Every `mam*` command in the docs' shell blocks runs as written against a live `mam up`, where it can.

tests/docs/test_docs.py parses each command with its program's own parser; this module runs them. One
`mam up` (the docs' own `mam up`, in a git repository with a commit) serves the module, with a runner
for `shell` (two slots: the job that asks holds one) and one with `--worktree` for the jobs that
`mam diff`/`merge`/`discard` land. A command that names a job (`job-20260101-120000-abc123`, a
`"$job"`, the short id `5732ef`) gets a real one submitted first, of the kind it needs: a finished
job, a worktree job of its own for each `merge` and `discard`, the job that runs the page's own
`mam ask` line (which the page's `mam answer` then answers), an unclaimed one to cancel. A daemon
(`mam-agent ...`) is started and must come online; it serves the rest of its page. Pages run in
parallel, each in its order; commands that touch the repository's git state take turns.

What cannot run here is listed in `NOT_HERE` with the reason; blocks another test runs end to end as
written (their `<!-- name: ... -->` marker) in `RUN_ELSEWHERE`. A listed reason that matches no
command any more fails the test, so the lists cannot rot.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from doc_pages import CHECKOUT, FIXED_ID, PAGES, Command, blocks, commands, relative

from brokers import free_port
from e2e import workspace_id
from support import BIN, Daemon, Watch, child_env, run, wait_for_json_file, wait_for_state

PROGRAMS = {"mam", "mam-agent", "mam-broker", "mam-projector"}
SHORT_ID = "5732ef"
"""The short id the pages use for a job (`mam diff 5732ef`)."""

RUN_ELSEWHERE = {
    "quickstart": "tests/docs/test_readme.py runs the README's quick start as written",
    "two-machines": "tests/agents/test_remote_runner.py runs the two-machine setup as written",
}
"""A block after `<!-- NAME: ... -->`: another test runs it, whole, as written."""

NATS = "a NATS cluster (nats-1..3, the block's MAM_BROKER_URL)"
NOT_HERE: list[tuple[str, str]] = [
    (
        r"^mam up --dashboard$",
        "a second `mam up` on the module's workspace, on the dashboard's fixed port 8383 "
        "(the tests serve it on free ports: tests/web/test_dashboard*.py)",
    ),
    (r"^mam-broker --port 1884 ", "a fixed port (1884) and a system-wide spool (/var/tmp/mam-spool)"),
    (
        r"^mam-projector --workspace ~/src/app --broker mqtt://127\.0\.0\.1:1884$",
        "the projector of the mam-broker on port 1884 above, for ~/src/app",
    ),
    (r"^mam-projector --broker mqtt://127\.0\.0\.1:1883$", "the standard MQTT port 1883, never used by tests"),
    (r"^mam-projector --workspace ~/src/app$", NATS),
    (r"^mam-agent --agent claude-code --workspace ~/src/app$", NATS),
    (r"^mam submit --prompt fix the tests --agent claude-code$", NATS),
    (
        r"^mam-agent --agent (claude-code|codex)\b",
        "the real agent CLI with its API key (tests/real_agents/test_real_agents*.py "
        "run the CLIs against local model servers)",
    ),
    (r"^mam submit --agent claude-code .*--follow", "follows to its end a job only the real Claude Code CLI runs"),
    (
        r"^mam submit --resume ",
        "continues an agent session, which only a real agent CLI records (tests/agents/test_job_limits.py resumes one)",
    ),
]
"""(regex on the command's words joined by spaces, `_as_written`; why it is not run here)."""

ALLOWED_EXIT: dict[str, set[int]] = {"doctor": {0, 1}}
"""Commands whose exit code is a verdict on this machine: `mam doctor --agent gemini` finds no login here."""

GIT_STATE = {"show", "diff", "merge", "discard", "worktrees"}
"""Subcommands that read or change the repository's git state: one at a time."""


def not_here(command: Command) -> str | None:
    for pattern, reason in NOT_HERE:
        if re.search(pattern, _as_written(command)):
            return reason
    return None


def _as_written(command: Command) -> str:
    """The command's words joined by spaces, its program by name (`.venv/bin/mam` as `mam`)."""
    return " ".join([Path(command.argv[0]).name, *command.argv[1:]])


def marked_blocks(page: Path) -> dict[int, str]:
    """First line of each shell block -> the `<!-- NAME: ... -->` marker right above its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    marked = {}
    for block in blocks(page.read_text(encoding="utf-8")):
        above = lines[block.line - 3] if block.line >= 3 else ""
        found = re.fullmatch(r"<!-- ([\w-]+): .* -->", above.strip())
        if found and found[1] in RUN_ELSEWHERE:
            marked[block.line] = found[1]
    return marked


def elsewhere(command: Command, marked: dict[int, str]) -> str | None:
    start = max((line for line in marked if line <= command.line), default=None)
    if start is None:
        return None
    text = command.page.read_text(encoding="utf-8").splitlines()
    end = next(n for n in range(start, len(text) + 1) if text[n - 1].strip().startswith("```"))
    return RUN_ELSEWHERE[marked[start]] if command.line < end else None


def plan() -> tuple[dict[Path, list[Command]], list[tuple[Command, str]]]:
    """The commands to run, by page in order, and those not run here with the reason."""
    to_run: dict[Path, list[Command]] = {}
    skipped: list[tuple[Command, str]] = []
    for page in PAGES:
        marked = marked_blocks(page)
        for command in commands(page, PROGRAMS):
            why = elsewhere(command, marked) or not_here(command)
            if why is not None:
                skipped.append((command, why))
            else:
                to_run.setdefault(page, []).append(command)
    return to_run, skipped


@dataclass
class Jobs:
    """The real jobs that stand for the ids the pages name."""

    finished: str = ""
    shown: str = ""
    """A finished worktree job with a change, for `mam show` and `mam diff` (never landed)."""
    landable: list[str] = field(default_factory=list)
    """One finished worktree job for each `mam merge` and `mam discard`."""
    asking: str = ""
    """The job that runs the page's `mam ask` line, for its `mam answer`."""
    unclaimed: str = ""

    def stand_in(self, subcommand: str) -> str:
        if subcommand in ("merge", "discard"):
            return self.landable.pop()
        if subcommand in ("show", "diff"):
            return self.shown
        if subcommand == "answer":
            return self.asking
        if subcommand == "cancel":
            return self.unclaimed
        return self.finished


@dataclass
class Live:
    root: Path
    logs: Path
    env: dict[str, str]
    url: str
    jobs: Jobs
    git: anyio.Lock = field(default_factory=anyio.Lock)
    failures: list[str] = field(default_factory=list)
    ran: list[Command] = field(default_factory=list)


def argv_of(command: Command, jobs: Jobs) -> list[str]:
    """The command with its program from this run's venv and real jobs for the ids it names."""
    program, *args = command.argv
    subcommand = args[0] if args else ""
    out = [str(BIN / Path(program).name)]
    for word in args:
        if word == FIXED_ID:
            word = jobs.stand_in(subcommand)
        elif word == SHORT_ID:
            word = jobs.stand_in(subcommand)[-6:]
        out.append(word)
    return out


async def mam_out(live: Live, *args: str, timeout: float = 60) -> str:
    done = await run([str(BIN / "mam"), *args], cwd=live.root, env=live.env, timeout=timeout)
    assert done.returncode == 0, f"mam {shlex.join(args)}: {done.stderr.decode()}"
    return done.stdout.decode()


async def submitted(live: Live, agent: str, prompt: str) -> str:
    return (await mam_out(live, "submit", "--agent", agent, "--prompt", prompt)).split()[0]


async def finished(live: Live, job: str) -> None:
    await mam_out(live, "wait", job, "--timeout", "60", timeout=90)


@asynccontextmanager
async def daemon(live: Live, argv: list[str], matches: Callable[[dict], bool], name: str) -> AsyncIterator[Daemon]:
    """A runner started as `argv`, once its status is online (matched by pid); stopped by PID after."""
    process = Daemon(argv, cwd=live.root, env=live.env, log=live.logs / f"{name}.log")
    try:
        ws_id = workspace_id(live.root)
        async with Watch(live.url, f"mam/{ws_id}/agents/+/status") as status:
            await status.json(lambda s: s["status"] == "online" and s["pid"] == process.pid and matches(s), timeout=30)
        yield process
    finally:
        process.stop()


async def run_page(live: Live, page_commands: list[Command]) -> None:
    async with AsyncExitStack() as daemons:
        for command in page_commands:
            await run_one(live, command, daemons)


async def run_one(live: Live, command: Command, daemons: AsyncExitStack) -> None:
    where = f"{relative(command.page)}:{command.line}: `{command.source}`"
    program, *args = command.argv
    name = Path(program).name
    live.ran.append(command)
    if name == "mam" and args == ["up"]:
        return  # the module's own server is this command
    argv = argv_of(command, live.jobs)
    if name == "mam-agent":
        try:
            await daemons.enter_async_context(daemon(live, argv, lambda _s: True, f"page-runner-{command.line}"))
        except TimeoutError:
            live.failures.append(f"{where}: never came online")
        return
    subcommand = args[0] if args else ""
    if subcommand in GIT_STATE:
        async with live.git:
            done = await run(argv, cwd=live.root, env=live.env, timeout=90)
    else:
        done = await run(argv, cwd=live.root, env=live.env, timeout=90)
    err = done.stderr.decode(errors="replace")
    if done.returncode not in ALLOWED_EXIT.get(subcommand, {0}) or "Traceback" in err:
        live.failures.append(f"{where}: ran {shlex.join(argv)}: exit {done.returncode}: {err.strip()[-400:]}")


def ask_line(to_run: dict[Path, list[Command]]) -> str:
    """The page's own `mam ask` line (`answer=$(mam ask ...) || exit 1`), as a job's script."""
    [asks] = [c for cs in to_run.values() for c in cs if c.argv[1:2] == ["ask"]]
    to_run[asks.page].remove(asks)  # it runs inside the job; the page's `mam answer` answers it
    return f'{asks.source}\necho "answer: $answer"\n'


REVIEW_PY = 'import sys\nprint("reviewed:", sys.stdin.read().strip() or "no prompt", sys.argv[1:])\n'
"""docs/agents.md's reviewer runs `python3 review.py --strict`, a script the page only names: a stand-in."""


@pytest.mark.timeout(300)
@pytest.mark.slow
async def test_every_command_in_the_docs_runs_against_a_live_mam_up(tmp_path: Path) -> None:
    to_run, skipped = plan()
    unused = [pattern for pattern, _ in NOT_HERE if not any(re.search(pattern, _as_written(c)) for c, _ in skipped)]
    assert not unused, f"NOT_HERE entries that match no command any more: {unused}"

    root = tmp_path / "workspace"
    root.mkdir()
    (root / "review.py").write_text(REVIEW_PY)
    for git in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "t"],
        ["config", "user.email", "t@localhost"],
        ["add", "review.py"],
        ["commit", "-q", "-m", "start"],
    ):
        subprocess.run(["git", "-C", str(root), *git], check=True)  # a repository with a commit: --worktree needs it
    (root / ".mam").mkdir()
    (root / ".mam" / "up.json").write_text(json.dumps({"port": free_port()}))  # never the machine's 1883
    env = child_env(MAM_BROKER_URL=None)
    up = Daemon([str(BIN / "mam"), "up"], cwd=root, env=env, log=tmp_path / "up.log")
    try:
        runtime = await wait_for_json_file(root / ".mam" / "runtime.json")
        live = Live(root, tmp_path, env, runtime["broker"], Jobs())
        shell = [str(BIN / "mam-agent"), "--agent", "shell", "--concurrency", "2"]  # the asking job holds one slot
        worktree = [str(BIN / "mam-agent"), "--agent", "wt", "--profile", "shell", "--worktree", "--concurrency", "4"]
        async with (
            daemon(live, shell, lambda s: s["agent"] == "shell", "shell"),
            daemon(live, worktree, lambda s: s["agent"] == "wt", "wt"),
        ):
            await prepare(live, to_run)
            async with anyio.create_task_group() as pages:
                for page_commands in to_run.values():
                    pages.start_soon(run_page, live, page_commands)
            asked = await wait_for_state(
                live.url,
                workspace_id(root),
                live.jobs.asking,
                lambda r: r["status"] in ("succeeded", "failed"),
                timeout=60,
            )
    finally:
        up.stop()
    assert not live.failures, "commands in the docs that do not run as written:\n" + "\n".join(live.failures)
    assert asked["status"] == "succeeded" and asked["result"] == "answer: yes\n", asked
    assert "Traceback" not in up.output()
    assert len(live.ran) >= 30, [c.source for c in live.ran]


async def prepare(live: Live, to_run: dict[Path, list[Command]]) -> None:
    """The jobs the pages' ids stand for, submitted and (but for two) finished before the pages run."""
    jobs = live.jobs
    landings = sum(1 for cs in to_run.values() for c in cs if c.argv[1:2] in (["merge"], ["discard"]))
    wanted = {
        "finished": ("shell", "echo done"),
        "shown": ("wt", "echo shown > shown.txt"),
        "unclaimed": ("nobody", "never claimed"),
        "asking": ("shell", ask_line(to_run)),
        **{f"landable-{n}": ("wt", f"echo {n} > landed-{n}.txt") for n in range(landings)},
    }
    made: dict[str, str] = {}

    async def one(name: str, agent: str, prompt: str) -> None:
        made[name] = await submitted(live, agent, prompt)
        if name != "unclaimed" and name != "asking":
            await finished(live, made[name])

    async with anyio.create_task_group() as tg:
        for name, (agent, prompt) in wanted.items():
            tg.start_soon(one, name, agent, prompt)
    jobs.finished, jobs.shown, jobs.unclaimed, jobs.asking = (
        made[k] for k in ("finished", "shown", "unclaimed", "asking")
    )
    jobs.landable = [made[f"landable-{n}"] for n in range(landings)]
    await wait_for_state(live.url, workspace_id(live.root), jobs.asking, lambda r: r["status"] == "waiting", timeout=30)


@pytest.mark.fast
def test_every_command_is_run_here_or_listed_with_a_reason() -> None:
    """The plan covers the pages: each command runs, or is listed with why not; none is dropped silently."""
    to_run, skipped = plan()
    found = [c for page in PAGES for c in commands(page, PROGRAMS)]
    assert len(found) == sum(map(len, to_run.values())) + len(skipped)
    assert all(reason for _, reason in skipped)
    assert sum(map(len, to_run.values())) > 2 * len([s for s in skipped if s[1] not in RUN_ELSEWHERE.values()])
    readme = [c for c, why in skipped if c.page == CHECKOUT / "README.md"]
    assert any("test_readme.py" in why for c, why in skipped if c in readme), "the quick start is run there"
