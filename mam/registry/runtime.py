"""The runtime file: how clients find the broker that serves their workspace.

The process that serves a workspace (`mam up`, `mam-projector`) writes
`runtime.json` beside the registry dir (`<root>/.mam/runtime.json` in the
usual layout) naming its broker URL (never a password) and pid, and removes
it on a clean stop. Clients given neither `--broker` nor `MAM_BROKER_URL` use
that URL while the file names a live process on this host. It is the one
file a client ever opens, and clients never write it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from mam.contract.broker_list import Brokers, parse_brokers
from mam.contract.broker_url import DEFAULT_BROKER_URL, ENV_BROKER_URL, parse_broker_url
from mam.contract.workspace import MAM_DIR, Workspace
from mam.registry import file_modes

GITIGNORE = ".gitignore"
GITIGNORE_TEXT = "# written by mam: the job registry, audit logs and runtime file are not source\n*\n"
RUNTIME_NAME = "runtime.json"
UP_STATE_NAME = "up.json"
"""Where `mam up` remembers its port across restarts (unlike the runtime file, kept on stop)."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the serving process says about itself."""

    broker: str
    pid: int
    host: str
    workspace: str
    started_at: str
    served_by: str
    """`mam up` or `mam-projector`."""


def runtime_path(workspace: Workspace) -> Path:
    return workspace.registry_dir.parent / RUNTIME_NAME


def write_runtime(workspace: Workspace, runtime: Runtime) -> Path:
    """Write the file atomically (a reader never sees half of it)."""
    path = runtime_path(workspace)
    file_modes.make_dirs(path.parent)
    _replace_file(path, (json.dumps(asdict(runtime), indent=2) + "\n").encode())
    return path


def remove_runtime(workspace: Workspace, pid: int) -> None:
    """Remove the file if it is still this process's (a newer server may have replaced it)."""
    path = runtime_path(workspace)
    current = read_runtime(workspace, live_only=False)
    if current is not None and current.pid == pid and current.host == socket.gethostname():
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass  # a read-only disk: clients see its pid gone (`read_runtime`)


def read_runtime(workspace: Workspace, *, live_only: bool = True) -> Runtime | None:
    """The serving process's runtime, or `None` when there is none (or, with
    `live_only`, when it names a process that is gone or on another host)."""
    try:
        data = json.loads(runtime_path(workspace).read_bytes())
        runtime = Runtime(**{key: data[key] for key in Runtime.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(runtime.pid, int) or not isinstance(runtime.broker, str):
        return None
    if live_only and not (runtime.host == socket.gethostname() and pid_alive(runtime.pid)):
        return None
    return runtime


def last_port(workspace: Workspace) -> int | None:
    """The port `mam up` served this workspace on last time, if it recorded one."""
    try:
        port = json.loads((workspace.registry_dir.parent / UP_STATE_NAME).read_bytes()).get("port")
    except (OSError, ValueError, AttributeError):
        return None
    return port if isinstance(port, int) and 0 < port < 65536 else None


def remember_port(workspace: Workspace, port: int) -> None:
    path = workspace.registry_dir.parent / UP_STATE_NAME
    file_modes.make_dirs(path.parent)
    _replace_file(path, (json.dumps({"port": port}) + "\n").encode())


def _replace_file(path: Path, data: bytes) -> None:
    """Write `path` atomically through a fresh temp file, never through a link planted at
    either name (a job runs in the workspace and could plant one): the temp file is created
    exclusively without following links, and the rename replaces a link at `path` itself."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        os.unlink(temp)  # a leftover, or a planted link: removing it follows nothing
    except FileNotFoundError:
        pass
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, file_modes.file_mode())
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except OSError as exc:
        _remove(temp)  # a full disk: no temp file left behind per try
        raise OSError(exc.errno, exc.strerror, str(path)) from None  # the file it was for, not the temp's name
    except BaseException:
        _remove(temp)
        raise


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def choose_broker(
    workspace: Workspace | None, *, explicit: str | None = None, env: Mapping[str, str] | None = None
) -> tuple[Brokers, str]:
    """The broker(s) a client of `workspace` should use, and where the choice came from:
    `explicit` (a `--broker` flag), else `MAM_BROKER_URL`, else the broker(s) the
    workspace's runtime file names while its process lives (skipped when
    `workspace` is `None`), else the default. Each may be a comma-separated list
    (`mam.contract.broker_list`): a `BrokerList` then, a `BrokerAddress` for one URL."""
    env = os.environ if env is None else env
    if explicit:
        return parse_brokers(explicit), "--broker"
    if url := env.get(ENV_BROKER_URL):
        return parse_brokers(url), f"${ENV_BROKER_URL}"
    if workspace is not None and (runtime := read_runtime(workspace)) is not None:
        where = f"{runtime_path(workspace)} ({runtime.served_by}, pid {runtime.pid})"
        return parse_brokers(runtime.broker), where
    return parse_broker_url(DEFAULT_BROKER_URL), "the default"


def ignore_in_git(workspace: Workspace) -> Path | None:
    """Write `<root>/.mam/.gitignore` (`*`) so the registry stays out of `git status`.

    Only when the registry or the logs live under `<root>/.mam/` (a workspace
    with its dirs elsewhere gets no `.mam/` just for this), and only if no
    such file exists: a user's own is never replaced. Returns the path written.
    """
    mam_dir = workspace.root / MAM_DIR
    if not any(d == mam_dir or mam_dir in d.parents for d in (workspace.registry_dir, workspace.logs_dir)):
        return None
    file_modes.make_dirs(mam_dir)
    path = mam_dir / GITIGNORE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, file_modes.file_mode())
    except FileExistsError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(GITIGNORE_TEXT)
    except BaseException:
        _remove(path)  # an empty one left by a full disk would never be written again
        raise
    return path
