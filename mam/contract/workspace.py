"""Workspace resolution, exactly as docs/design/contract.md orders it.

Everything is resolved at call time from the environment (and explicit flags),
never at import, so a process started with `WORKSPACE_ROOT` set lands there
whatever its cwd. `registry_dir()` and `logs_dir()` are the library contract
and keep their order; `resolve()`, which every command uses, also finds the
root the way git finds a repository when nothing names it (`find_root`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mam.contract.errors import UsageError
from mam.contract.ids import validate_workspace_id

ENV_JOBS_DIR = "MAM_JOBS_DIR"
ENV_LOGS_DIR = "DELEGATE_JOB_LOGS_DIR"
ENV_WORKSPACE_ROOT = "WORKSPACE_ROOT"
ENV_WORKSPACE_ID = "MAM_WORKSPACE"

MAM_DIR = ".mam"
JOBS_SUBDIR = "jobs"
LOGS_SUBDIR = "delegate_job_logs"


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _workspace_root_env(env: Mapping[str, str]) -> Path | None:
    """`WORKSPACE_ROOT`, only when it names an existing directory."""
    value = env.get(ENV_WORKSPACE_ROOT)
    if value and os.path.isdir(value):
        return Path(value)
    return None


def registry_dir(env: Mapping[str, str] | None = None) -> Path:
    """The registry dir: `MAM_JOBS_DIR`, `$WORKSPACE_ROOT/.mam/jobs`, or `.mam/jobs`."""
    env = _env(env)
    if jobs := env.get(ENV_JOBS_DIR):
        return Path(jobs)
    if (root := _workspace_root_env(env)) is not None:
        return root / MAM_DIR / JOBS_SUBDIR
    return Path(MAM_DIR) / JOBS_SUBDIR


def logs_dir(env: Mapping[str, str] | None = None) -> Path:
    """The audit-log dir, in the four-step order of docs/design/contract.md."""
    env = _env(env)
    if logs := env.get(ENV_LOGS_DIR):
        return Path(logs)
    if jobs := env.get(ENV_JOBS_DIR):
        return Path(jobs).parent / LOGS_SUBDIR
    if (root := _workspace_root_env(env)) is not None:
        return root / MAM_DIR / LOGS_SUBDIR
    return Path(os.path.join(os.getcwd(), MAM_DIR, LOGS_SUBDIR))


def workspace_root(env: Mapping[str, str] | None = None) -> Path:
    """The workspace root the id derives from: `WORKSPACE_ROOT`, else cwd."""
    root = _workspace_root_env(_env(env))
    return root if root is not None else Path(os.getcwd())


RULE_FLAG = "--workspace"
RULE_ENV = "$WORKSPACE_ROOT"
RULE_MAM_DIR = "nearest directory at or above the cwd holding .mam/"
RULE_GIT = "top of the git work tree holding the cwd"
RULE_CWD = "the cwd (no .mam/ or git work tree above it)"


def find_root(start: Path) -> tuple[Path, str]:
    """The root as git finds a repository: the nearest directory at or above `start`
    holding a `.mam/` directory, else the top of the enclosing git work tree
    (a `.git` directory or file), else `start`. Returns the root and the rule that chose it."""
    start = start.absolute()
    chain = [start, *start.parents]
    for directory in chain:
        if (directory / MAM_DIR).is_dir():
            return directory, RULE_MAM_DIR
    for directory in chain:
        if (directory / ".git").exists():
            return directory, RULE_GIT
    return start, RULE_CWD


_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def derive_workspace_id(root: Path) -> str:
    """A slug of the root's basename plus a short hash of its real path."""
    real = os.path.realpath(root)
    slug = _SLUG_UNSAFE.sub("-", os.path.basename(real).lower()).strip("._-") or "root"
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{slug[:48]}-{digest}"


@dataclass(frozen=True, slots=True)
class Workspace:
    """A resolved workspace: where its files live and which topics it owns."""

    root: Path
    id: str
    registry_dir: Path
    logs_dir: Path
    rule: str = RULE_ENV
    """Which rule chose the root (`mam workspace` says it)."""

    def as_dict(self) -> dict[str, str]:
        return {
            "root": str(self.root),
            "root_rule": self.rule,
            "id": self.id,
            "registry_dir": str(self.registry_dir),
            "logs_dir": str(self.logs_dir),
        }


def resolve(
    *,
    workspace: str | os.PathLike[str] | None = None,
    workspace_id: str | None = None,
    registry: str | os.PathLike[str] | None = None,
    logs: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Workspace:
    """Resolve a workspace from explicit flags first, then the environment.

    `--workspace DIR` stands for `WORKSPACE_ROOT=DIR` and wins over every
    variable; `--registry-dir` wins over `--workspace` for the registry and
    takes the log dir with it (its sibling) unless `--logs-dir` is given.
    `WORKSPACE_ROOT` naming no directory is an error, not a fallback. With
    neither, the root is found from the cwd (`find_root`) and stands for
    `WORKSPACE_ROOT`; `MAM_JOBS_DIR` and `DELEGATE_JOB_LOGS_DIR` keep their
    precedence over it. Paths are made absolute here, once, so a later chdir
    changes nothing.
    """
    env = dict(_env(env))
    rule = RULE_ENV
    if workspace is not None:
        root_path = Path(workspace)
        if not root_path.is_dir():
            raise UsageError(f"workspace {str(root_path)!r} is not a directory: create it or pass another --workspace")
        env[ENV_WORKSPACE_ROOT] = str(root_path)
        env.pop(ENV_JOBS_DIR, None)
        env.pop(ENV_LOGS_DIR, None)
        rule = RULE_FLAG
    elif given := env.get(ENV_WORKSPACE_ROOT):
        if not os.path.isdir(given):
            raise UsageError(
                f"WORKSPACE_ROOT={given!r} is not a directory: create it, fix or unset WORKSPACE_ROOT, "
                "or pass --workspace DIR"
            )
    else:
        found, rule = find_root(Path(os.getcwd()))
        env[ENV_WORKSPACE_ROOT] = str(found)
    if registry is not None:
        env[ENV_JOBS_DIR] = str(registry)
        env.pop(ENV_LOGS_DIR, None)
    if logs is not None:
        env[ENV_LOGS_DIR] = str(logs)
    root = workspace_root(env).absolute()
    ws_id = workspace_id or env.get(ENV_WORKSPACE_ID) or derive_workspace_id(root)
    return Workspace(
        root=root,
        id=validate_workspace_id(ws_id),
        registry_dir=registry_dir(env).absolute(),
        logs_dir=logs_dir(env).absolute(),
        rule=rule,
    )
