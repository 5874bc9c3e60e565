"""Shell completion (issues 31 and 43): job ids (by their start or their short id), statuses, agents, sessions,
labels, runner labels, roles, models, outcomes, event types and orders from the workspace's files, in bash,
zsh and fish, through the scripts `mam completion SHELL` prints, run by the real shells (zsh and fish where
installed); file names only for a path, never for a flag that takes anything else (`mam submit --agent`,
`--prompt`, `--priority`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil

import anyio
import pytest
from output_forms_support import logged_job
from runner_support import agent_runner, mock_command

from mam.contract import events as ev

from brokers import free_port
from e2e import up_process
from support import BIN, DEAD_BROKER, child_env, run
from workspace_support import WorkspacePaths


@pytest.fixture
def known(ws: WorkspacePaths) -> WorkspacePaths:
    logged_job(
        ws,
        "kid-job",
        "2026-01-01T00:00:00",
        ev.Submitted(
            prompt="p",
            agent="zeta-agent",
            labels={"team": "x"},
            agent_session="s1",
            role="reviewer",
            model="opus-4",
            require={"gpu": "yes"},
        ),
    )
    logged_job(ws, "other-job", "2026-01-01T00:01:00", ev.Submitted(prompt="p", agent="codex"), ev.Cancelled())
    for job in ("job-20260101-000200-5732ef", "job-20260101-000300-57a1b2"):  # generated ids: by their short id
        logged_job(ws, job, "2026-01-01T00:02:00", ev.Submitted(prompt="p", agent="codex"))
    (ws.root / ".mam" / "roles").mkdir()
    (ws.root / ".mam" / "roles" / "researcher.md").write_text("You research.")
    for name in ("sfile", "running-notes", "zeta-file", "kid-file", "gfile", "5732-file", "opus-file"):
        (ws.elsewhere / name).write_text("")  # what readline would offer as file names
    (ws.elsewhere / "zeta-dir").mkdir()
    (ws.elsewhere / "pw").write_text("kim:$7$hash\nkeith:$7$hash\n")
    return ws


def _env(ws: WorkspacePaths) -> dict[str, str]:
    """The workspace by $WORKSPACE_ROOT, a broker that answers nothing: completion reads files only."""
    return child_env(PATH=f"{BIN}:/usr/bin:/bin", WORKSPACE_ROOT=str(ws.root), MAM_BROKER_URL=DEAD_BROKER)


CASES = [
    ("mam show k", ["kid-job"]),
    ("mam cancel o", ["other-job"]),
    ("mam jobs tree k", ["kid-job"]),
    ("mam jobs --parent k", ["kid-job"]),
    ("mam jobs --status s", ["submitted", "succeeded"]),
    ("mam jobs --status cancelled,ru", ["cancelled,running"]),
    ("mam jobs --status zz", []),
    ("mam jobs --agent ze", ["zeta-agent"]),
    ("mam jobs --agent c", ["claude-code", "codex"]),
    ("mam jobs --label t", ["team=x"]),
    ("mam jobs --session s", ["s1"]),
    ("mam jobs --sort-by=-d", ["-duration"]),
    ("mam jobs -o y", ["yaml"]),
    ("mam cancel --status r", ["retrying", "running"]),
    ("mam show 57", ["5732ef", "57a1b2"]),  # the short ids every message and the dashboard show
    ("mam logs 5732", ["5732ef"]),
    ("mam events job-20260101-0002", ["job-20260101-000200-5732ef"]),  # the whole id, by its start
    ("mam submit --parent 57a", ["57a1b2"]),
    ("mam submit --resume k", ["kid-job"]),
    ("mam submit --after 5732ef,57", ["5732ef,57a1b2"]),
    ("mam ask --job o", ["other-job"]),
    ("mam submit --agent c", ["claude-code", "codex"]),
    ("mam session create --agent ze", ["zeta-agent"]),
    ("mam doctor --agent ze", ["zeta-agent"]),
    ("mam submit --agent-session s", ["s1"]),
    ("mam submit --label t", ["team=x"]),
    ("mam submit --require g", ["gpu=yes"]),
    ("mam submit --role r", ["researcher", "reviewer"]),
    ("mam submit --model o", ["opus-4"]),
    ("mam submit --retry-on failed,", ["failed,lost", "failed,timed_out"]),
    ("mam schema --type sub", ["submitted"]),
    ("mam passwd pw k", ["keith", "kim"]),
    ("mam jobs --workspace ze", ["zeta-dir/"]),  # a directory: directories only
    ("mam submit --prompt s", []),  # free values: nothing, not the files in the cwd
    ("mam submit --priority 5", []),
    ("mam submit --job-id k", []),
    ("mam jobs --since 5", []),
    ("mam submit --agent zz", []),
]
SOME = [CASES[i] for i in (0, 4, 5, 7, 9, 11, 14, 21, 26, 32, 33)]
"""What zsh and fish are asked (bash is asked every case): a job id, statuses (also after a comma), an agent,
a label, an order, short ids, `mam submit --agent` and `--require`, a directory, and a free value (nothing)."""


def bash_probe(line: str) -> str:
    """A bash script that asks `mam completion bash`'s function for `line`, as TAB at its end would, and prints
    each offer on a line."""
    words = line.split() + ([""] if line.endswith(" ") else [])
    return (
        f"source <(mam completion bash); COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}; "
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        '_python_argcomplete mam; printf "%s\\n" "${COMPREPLY[@]}"'
    )


@pytest.mark.slow
async def test_bash_completes_ids_statuses_agents_labels_and_never_file_names(known: WorkspacePaths) -> None:
    for line, expected in [*CASES, (f"mam show --workspace {known.root} k", ["kid-job"])]:
        probe = bash_probe(line)
        env = _env(known) if "--workspace" not in line else child_env(PATH=f"{BIN}:/usr/bin:/bin")
        done = await run(["bash", "-c", probe], cwd=known.elsewhere, env=env)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.decode().split()) == expected, line
    # registered without `-o default`: nothing offered is not readline's file names
    done = await run(
        ["bash", "-c", "source <(mam completion bash); complete -p mam"], cwd=known.elsewhere, env=_env(known)
    )
    assert done.stdout.decode().split()[:-1] == [
        "complete",
        "-o",
        "bashdefault",
        "-o",
        "nospace",
        "-F",
        "_python_argcomplete",
    ]


@pytest.mark.skipif(
    shutil.which("zsh") is None and os.environ.get("CI") != "true", reason="zsh is not installed (CI installs it)"
)
async def test_zsh_completes_through_its_script(known: WorkspacePaths) -> None:
    """The zsh script's own function, run by zsh, with `_describe` (the completion system's, which needs a
    terminal) replaced by one printing what it was handed."""
    for line, expected in SOME:
        words = line.split() + ([""] if line.endswith(" ") else [])
        probe = (
            "autoload() { :; }; compdef() { :; }; is-at-least() { return 0; }; "
            '_describe() { print -rl -- "${(@P)2}"; }; source <(mam completion zsh); '
            f"BUFFER={shlex.quote(line)}; CURSOR=${{#BUFFER}}; words=({' '.join(shlex.quote(w) for w in words)}); "
            "_python_argcomplete"
        )
        done = await run(["zsh", "-f", "-c", probe], cwd=known.elsewhere, env=_env(known))
        assert done.returncode == 0, done.stderr
        offered = sorted(
            entry.split(":", 1)[0].removeprefix("--sort-by=") for entry in done.stdout.decode().split("\n") if entry
        )  # zsh completes the whole word `--sort-by=-duration`
        assert offered == expected, line


@pytest.mark.skipif(
    shutil.which("fish") is None and os.environ.get("CI") != "true", reason="fish is not installed (CI installs it)"
)
async def test_fish_completes_through_its_script(known: WorkspacePaths) -> None:
    for line, expected in SOME:
        probe = f"mam completion fish | source; complete -C {shlex.quote(line)}"
        done = await run(["fish", "--no-config", "-c", probe], cwd=known.elsewhere, env=_env(known))
        assert done.returncode == 0, done.stderr
        offered = sorted(
            entry.split("\t", 1)[0].removeprefix("--sort-by=") for entry in done.stdout.decode().split("\n") if entry
        )
        assert offered == expected, line


TYPED = [
    ("mam show 5732\t", "mam show 5732ef"),  # a short id, completed in place
    ("mam submit --agent ze\t", "mam submit --agent zeta-agent"),
    ("mam submit --require g\t", "mam submit --require gpu=yes"),
    ("mam jobs --workspace ze\t", "mam jobs --workspace zeta-dir/"),
    ("mam submit --prompt s\t\t", "mam submit --prompt s"),  # readline's file name would be `sfile`
    ("mam submit --priority 5\t\t", "mam submit --priority 5"),  # ... `5732-file`
    ("mam submit --label zz\t\t", "mam submit --label zz"),
]
"""Keys typed at an interactive shell, and the line they leave."""


SHELLS = {
    "bash": (["bash", "--noprofile", "--rcfile", "{rc}", "-i"], 'source <(mam completion bash)\nPS1="READY> "\n', ""),
    "zsh": (
        ["zsh", "-f", "-i"],
        "",
        "autoload -U compinit; compinit -u; source <(mam completion zsh); PS1='READY''> '\r",
    ),
}
"""How each shell starts interactive with mam's completion: its argv, an rc file ({rc}), what is typed first."""


@pytest.mark.parametrize("shell", sorted(SHELLS))
async def test_tab_at_an_interactive_shell_completes_in_place_and_never_offers_file_names(
    known: WorkspacePaths,
    shell: str,
) -> None:
    """As a user types: TAB at an interactive bash (readline on a terminal, the script registered with
    `-o bashdefault`, which may fall back to bash's own completions) and zsh (its completion system, compinit).
    Each line is then echoed as it stands (Ctrl-A, `echo`), so what TAB left on it is read back exactly."""
    import pty

    if shutil.which(shell) is None and os.environ.get("CI") != "true":
        pytest.skip(f"{shell} is not installed (CI installs it)")
    argv, rc_text, first = SHELLS[shell]
    rc = known.elsewhere.parent / "completion.rc"
    rc.write_text(rc_text)
    env = {**_env(known), "TERM": "dumb", "INPUTRC": "/dev/null", "HOME": str(known.elsewhere)}
    master, slave = pty.openpty()
    proc = await anyio.open_process(
        [arg.format(rc=rc) for arg in argv], cwd=known.elsewhere, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    screen = _Screen(master)
    try:
        os.write(master, first.encode())
        await screen.until(rb"READY> ")
        for n, (keys, expected) in enumerate(TYPED):
            start = len(screen.seen)
            os.write(master, keys.encode() + f"\x01echo LINE{n}: \r".encode())
            said = await screen.until(rf"\r\nLINE{n}: (.*?)\r\n".encode(), start)
            assert said.group(1).decode() == expected, (keys, screen.seen[start:])
            assert not re.search(rb"sfile|running-notes|5732-file|opus-file", screen.seen[start:]), keys
    finally:
        proc.kill()
        await proc.wait()
        os.close(master)
        os.close(slave)


class _Screen:
    """What a terminal has shown so far, read from its pty."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = b""

    async def until(self, pattern: bytes, start: int = 0, timeout: float = 15) -> re.Match[bytes]:
        """The first match of `pattern` in what was shown from `start` on, once it is there."""
        with anyio.fail_after(timeout):
            while (found := re.compile(pattern).search(self.seen, start)) is None:
                self.seen += await anyio.to_thread.run_sync(os.read, self.fd, 65536, abandon_on_cancel=True)
        return found


async def test_require_completes_the_labels_live_runners_offer(ws: WorkspacePaths) -> None:
    """The runners' own labels are only in their retained statuses: `--require` asks the broker the workspace's
    runtime file names (a live `mam up`), briefly; with it stopped, only what jobs required is offered."""
    probe = bash_probe("mam submit --require g")
    env = child_env(PATH=f"{BIN}:/usr/bin:/bin", WORKSPACE_ROOT=str(ws.root), MAM_BROKER_URL=None)
    async with up_process(ws.root, ws.elsewhere, free_port()) as up:
        url = json.loads((ws.root / ".mam" / "runtime.json").read_text())["broker"]
        async with agent_runner(url, ws, *mock_command(), "--label", "gpu=yes", "--label", "gen=3"):
            done = await run(["bash", "-c", probe], cwd=ws.elsewhere, env=env)
            assert sorted(done.stdout.decode().split()) == ["gen=3", "gpu=yes"], done.stderr
        up.stop()
    done = await run(["bash", "-c", probe], cwd=ws.elsewhere, env=env)
    assert done.stdout.decode().split() == [], "no broker serving the workspace: nothing asked, nothing offered"
