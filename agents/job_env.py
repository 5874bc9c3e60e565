"""A job's environment: the runner's own, mam's variables, its profile's, and the runner's `mam` on PATH.

The agent inherits the runner's environment, with `MAM_JOB_ID`, `MAM_WORKSPACE`, `WORKSPACE_ROOT`, the
runner's broker list as `MAM_BROKER_URL` (unless the runner's environment sets one) and the prompt as
`MAM_PROMPT` (when it fits in one environment string). A profile's `env` adds variables every job of it
gets, and `permissions_env` those of one permission level (Gemini CLI's workspace trust, Claude Code's
`IS_SANDBOX=1` under `full`: profiles.json); they replace the runner's own (a machine that exports
`IS_SANDBOX=yes` still gets the `1` Claude Code checks for). To change them, override the profile in
`.mam/profiles.json`.

The runner's own `mam` comes first on PATH: a job that delegates (`mam submit`) or asks (`mam ask`) runs the
mam of the runner that started it, also when the runner was started by its full path
(`.venv/bin/mam-agent`) from a shell whose PATH has no mam. Only `mam` is put there (a directory of its
own holding a link to it), so the runner's Python and its other scripts do not shadow the project's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

import msgspec

MAX_ENV_STRING = 128 * 1024
"""Linux refuses to exec with one environment string longer than this (MAX_ARG_STRLEN):
a longer prompt goes to the agent on stdin only, never into a failed start."""


class ProfileEnv(msgspec.Struct, frozen=True):
    """A profile's variables: for every job (`always`), and per permission level (`levels`)."""

    always: dict[str, str] = {}
    levels: dict[str, dict[str, str]] = {}

    def for_level(self, level: str | None) -> dict[str, str]:
        return self.always | (self.levels.get(level, {}) if level else {})


def own_mam() -> Path | None:
    """The `mam` installed beside the running runner: next to its console script (sys.argv[0]), else next to
    its interpreter (a venv's bin)."""
    places = [Path(sys.argv[0]).parent] if sys.argv and os.sep in sys.argv[0] else []
    places.append(Path(sys.executable).parent)
    for place in places:
        candidate = place / "mam"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    return None


@cache
def own_mam_dir() -> str | None:
    """A directory holding only a link to this runner's `mam` (made once per process, removed at exit);
    None when no `mam` is installed beside the runner."""
    mam = own_mam()
    if mam is None:
        return None
    place = tempfile.mkdtemp(prefix="mam-agent-path-")
    os.symlink(mam, os.path.join(place, "mam"))
    atexit.register(shutil.rmtree, place, True)
    return place


def with_own_mam(path: str | None) -> str:
    """`path` with the runner's own mam first."""
    place = own_mam_dir()
    parts = [p for p in (path or os.defpath).split(os.pathsep) if p != place]
    return os.pathsep.join([place, *parts] if place else parts)


def job_environment(
    *,
    base: dict[str, str],
    job_id: str,
    workspace_id: str,
    workspace_root: Path,
    broker_url: str | None,
    prompt: str,
    extra: dict[str, str],
) -> tuple[dict[str, str], bool]:
    """The agent's environment, and whether the prompt fit in `MAM_PROMPT`."""
    env = base | extra
    env |= {"MAM_JOB_ID": job_id, "MAM_WORKSPACE": workspace_id, "WORKSPACE_ROOT": str(workspace_root)}
    env["PATH"] = with_own_mam(env.get("PATH"))
    if broker_url and not env.get("MAM_BROKER_URL"):
        env["MAM_BROKER_URL"] = broker_url
    env.pop("MAM_PROMPT", None)
    fits = len(f"MAM_PROMPT={prompt}".encode()) + 1 <= MAX_ENV_STRING
    if fits:
        env["MAM_PROMPT"] = prompt
    return env, fits


__all__ = ["MAX_ENV_STRING", "ProfileEnv", "job_environment", "own_mam", "own_mam_dir", "with_own_mam"]
