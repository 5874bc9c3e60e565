"""Shell completion (issue 31): job ids, statuses, agents, sessions, labels and orders from the workspace's
registry, in bash, zsh and fish, through the scripts `mam completion SHELL` prints, run by the real shells
(zsh and fish where installed); never file names for a flag that takes a status or an agent."""

from __future__ import annotations

import os
import shlex
import shutil

import pytest
from output_forms_support import logged_job

from mam.contract import events as ev

from conftest import WorkspacePaths
from support import BIN, DEAD_BROKER, child_env, run


@pytest.fixture
def known(ws: WorkspacePaths) -> WorkspacePaths:
    logged_job(ws, "kid-job", "2026-01-01T00:00:00",
               ev.Submitted(prompt="p", agent="zeta-agent", labels={"team": "x"}, agent_session="s1"))
    logged_job(ws, "other-job", "2026-01-01T00:01:00", ev.Submitted(prompt="p", agent="codex"), ev.Cancelled())
    for name in ("sfile", "running-notes", "zeta-file", "kid-file"):  # what readline would offer as file names
        (ws.elsewhere / name).write_text("")
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
]
SOME = [CASES[i] for i in (0, 4, 5, 7, 9, 11)]
"""What zsh and fish are asked (bash is asked every case): a job id, statuses (also after a comma), an agent,
a label, an order."""


@pytest.mark.slow
async def test_bash_completes_ids_statuses_agents_labels_and_never_file_names(known: WorkspacePaths) -> None:
    for line, expected in [*CASES, (f"mam show --workspace {known.root} k", ["kid-job"])]:
        words = line.split() + ([""] if line.endswith(" ") else [])
        probe = (f"source <(mam completion bash); COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}; "
                 f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
                 '_python_argcomplete mam; printf "%s\\n" "${COMPREPLY[@]}"')
        env = _env(known) if "--workspace" not in line else child_env(PATH=f"{BIN}:/usr/bin:/bin")
        done = await run(["bash", "-c", probe], cwd=known.elsewhere, env=env)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.decode().split()) == expected, line
    # registered without `-o default`: nothing offered is not readline's file names
    done = await run(["bash", "-c", "source <(mam completion bash); complete -p mam"], cwd=known.elsewhere,
                     env=_env(known))
    assert done.stdout.decode().split()[:-1] == ["complete", "-o", "bashdefault", "-o", "nospace", "-F",
                                                  "_python_argcomplete"]


@pytest.mark.skipif(shutil.which("zsh") is None and os.environ.get("CI") != "true", reason="zsh is not installed (CI installs it)")
async def test_zsh_completes_through_its_script(known: WorkspacePaths) -> None:
    """The zsh script's own function, run by zsh, with `_describe` (the completion system's, which needs a
    terminal) replaced by one printing what it was handed."""
    for line, expected in SOME:
        words = line.split() + ([""] if line.endswith(" ") else [])
        probe = ("autoload() { :; }; compdef() { :; }; is-at-least() { return 0; }; "
                 '_describe() { print -rl -- "${(@P)2}"; }; source <(mam completion zsh); '
                 f"BUFFER={shlex.quote(line)}; CURSOR=${{#BUFFER}}; words=({' '.join(shlex.quote(w) for w in words)}); "
                 "_python_argcomplete")
        done = await run(["zsh", "-f", "-c", probe], cwd=known.elsewhere, env=_env(known))
        assert done.returncode == 0, done.stderr
        offered = sorted(entry.split(":", 1)[0].removeprefix("--sort-by=") for entry in done.stdout.decode().split("\n")
                         if entry)  # zsh completes the whole word `--sort-by=-duration`
        assert offered == expected, line


@pytest.mark.skipif(shutil.which("fish") is None and os.environ.get("CI") != "true", reason="fish is not installed (CI installs it)")
async def test_fish_completes_through_its_script(known: WorkspacePaths) -> None:
    for line, expected in SOME:
        probe = f"mam completion fish | source; complete -C {shlex.quote(line)}"
        done = await run(["fish", "--no-config", "-c", probe], cwd=known.elsewhere, env=_env(known))
        assert done.returncode == 0, done.stderr
        offered = sorted(entry.split("\t", 1)[0].removeprefix("--sort-by=") for entry in done.stdout.decode().split("\n")
                         if entry)
        assert offered == expected, line
