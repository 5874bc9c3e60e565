"""What shell completion offers for each flag and argument of `mam` that takes a value.

`complete(action, kind)` gives an argparse action the completer of `kind` (argcomplete calls
`action.completer` with the word typed so far and the arguments parsed before it, so `--workspace DIR`
given earlier is the workspace read). Known values come from the workspace's files
(`mam.registry.known_values`, `.mam/profiles.json`, `.mam/roles/`, the runtime file, the set-aside file),
and from the broker only for `--require` (the runners' labels are nowhere else), within half a second:
a completion is answered while the user waits at the prompt. A path completes file
or directory names; a value nobody can know in advance (a prompt, seconds, a count, a new id) is `free`
and completes nothing.

A flag declared in mam/cli/ is given its completer where it is declared. The flags declared below the
command line (the workspace, broker and TLS options, `mam up`'s broker, projector and metrics flags, the
dashboard's), which may not import it, get theirs by name from `BELOW` (`complete_below`). Every flag that
takes a value has one (tests/codebase/test_completion_coverage.py); one without would complete nothing
(`mam.cli.completion` gives argcomplete no default), never file names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from mam.cli.id_completion import id_forms, listed_forms
from mam.contract.record import Status
from mam.process.argparse_internals import actions, is_subparsers, subcommands
from mam.registry.ordering import SORT_FIELDS

Completer = Callable[..., "list[str] | Mapping[str, str]"]

USERS_READ: Final = 1 << 20
"""Bytes of a password file read for its user names."""


def _workspace(parsed_args: argparse.Namespace | None) -> Any:
    from mam.process.options import workspace_from_args

    return workspace_from_args(parsed_args or argparse.Namespace())


def _listed(choices: Iterable[str], prefix: str) -> list[str]:
    """`choices` for the last of comma-separated values (`--status running,su`): each offer is the list so far
    with one choice not in it yet."""
    done, _sep, last = prefix.rpartition(",")
    given = set(done.split(",")) if done else set()
    head = f"{done}," if done else ""
    return [head + choice for choice in choices if choice not in given and choice.startswith(last)]


def _statuses(prefix: str, **_: Any) -> list[str]:
    return _listed((status.value for status in Status), prefix)


def _outcomes(prefix: str, **_: Any) -> list[str]:
    from mam.contract.attempts import RETRY_OUTCOMES

    return _listed(RETRY_OUTCOMES, prefix)


def _from_workspace(values: Callable[[Any], list[str]]) -> Completer:
    def completer(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
        try:
            found = values(_workspace(parsed_args))
        except Exception:  # noqa: BLE001 - no workspace, an unreadable registry: nothing to offer, never a trace
            return []
        return [value for value in found if value.startswith(prefix)]

    return completer


def _job_ids(forms: Callable[[Iterable[str], str], dict[str, str]]) -> Completer:
    """Job ids in `forms` (`mam.cli.id_completion`: by their start or their short id)."""

    def completer(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> Mapping[str, str]:
        from mam.registry.known_values import known_job_ids

        try:
            ids = known_job_ids(_workspace(parsed_args))
        except Exception:  # noqa: BLE001 - as above
            return {}
        return forms(ids, prefix)

    return completer


def _agents(workspace: Any) -> list[str]:
    """The agents of the workspace's jobs and of its profiles (`.mam/profiles.json` and the built-in ones)."""
    from mam.agents.profiles import load_profiles
    from mam.registry.known_values import known_agents

    found = set(known_agents(workspace))
    try:
        found.update(load_profiles(workspace.root))
    except Exception:  # noqa: BLE001 - a broken profiles file: `mam doctor` says so, completion offers the rest
        pass
    return sorted(found)


def _sessions(workspace: Any) -> list[str]:
    from mam.registry.known_values import known_sessions

    return known_sessions(workspace)


def _labels(workspace: Any) -> list[str]:
    from mam.registry.known_values import known_labels

    return known_labels(workspace)


def _requirements(workspace: Any) -> list[str]:
    """The runner labels jobs required, and those the runners offer (in their retained statuses on the
    broker serving the workspace, asked for at most half a second: `mam.cli.runner_labels`)."""
    from mam.cli.runner_labels import runner_labels
    from mam.registry.known_values import known_requirements

    return sorted(set(known_requirements(workspace)) | set(runner_labels(workspace)))


def _roles(workspace: Any) -> list[str]:
    """The roles with a briefing (`.mam/roles/ROLE.md`) and the roles of the workspace's jobs."""
    from mam.registry.known_values import known_roles

    briefed = {path.stem for path in (workspace.root / ".mam" / "roles").glob("*.md")}
    return sorted(briefed.union(known_roles(workspace)))


def _models(workspace: Any) -> list[str]:
    from mam.registry.known_values import known_models

    return known_models(workspace)


def _set_aside(workspace: Any) -> list[str]:
    """The set-aside messages by the short id `mam set-aside` shows."""
    from mam.registry.set_aside_file import SHORT_ID, entry_id, read_entries

    return [entry_id(entry)[:SHORT_ID] for entry in read_entries(workspace.logs_dir)]


def _workspace_ids(workspace: Any) -> list[str]:
    return [workspace.id]


def _brokers(workspace: Any) -> list[str]:
    """The broker the workspace's `mam up` (or projector) last named (never with a password), and the default."""
    from mam.contract.broker_url import DEFAULT_BROKER_URL
    from mam.registry.runtime import read_runtime

    runtime = read_runtime(workspace, live_only=False)
    return list(dict.fromkeys([*([runtime.broker] if runtime else []), DEFAULT_BROKER_URL]))


def _event_types(prefix: str, **_: Any) -> list[str]:
    from mam.contract.events import EVENT_TYPES

    return [name for name in EVENT_TYPES if name.startswith(prefix)]


def _orders(prefix: str, **_: Any) -> list[str]:
    return [f"{sign}{field}" for sign in ("", "-", "+") for field in SORT_FIELDS if f"{sign}{field}".startswith(prefix)]


def _users(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
    """The users of the password file named before (`mam passwd FILE USER`: changing one's password)."""
    try:
        with open(getattr(parsed_args, "file", None) or "", "rb") as passwords:
            text = passwords.read(USERS_READ).decode("utf-8", "replace")
    except (OSError, TypeError):
        return []
    names = (line.split(":", 1)[0] for line in text.splitlines() if ":" in line and not line.startswith("#"))
    return [name for name in dict.fromkeys(names) if name.startswith(prefix)]


def _paths(directories: bool) -> Completer:
    def completer(prefix: str, **kwargs: Any) -> list[str]:
        from argcomplete.completers import DirectoriesCompleter, FilesCompleter  # only while completing

        found = (DirectoriesCompleter() if directories else FilesCompleter())(prefix, **kwargs)
        return list(found)

    return completer


def _nothing(**_: Any) -> list[str]:
    return []


COMPLETERS: Final[dict[str, Completer]] = {
    "job": _job_ids(id_forms),
    "jobs": _job_ids(listed_forms),
    "status": _statuses,
    "outcome": _outcomes,
    "agent": _from_workspace(_agents),
    "session": _from_workspace(_sessions),
    "label": _from_workspace(_labels),
    "require": _from_workspace(_requirements),
    "role": _from_workspace(_roles),
    "model": _from_workspace(_models),
    "set-aside": _from_workspace(_set_aside),
    "workspace-id": _from_workspace(_workspace_ids),
    "broker": _from_workspace(_brokers),
    "event-type": _event_types,
    "sort": _orders,
    "user": _users,
    "file": _paths(directories=False),
    "dir": _paths(directories=True),
    "free": _nothing,
}
"""By kind: what `complete(action, kind)` attaches."""

BELOW: Final[dict[str, str]] = {
    "--workspace": "dir",
    "--registry-dir": "dir",
    "--logs-dir": "dir",
    "--workspace-id": "workspace-id",
    "--broker": "broker",
    "--cafile": "file",
    "--certfile": "file",
    "--keyfile": "file",
    "--password-file": "file",
    "--acl-file": "file",
    "--host": "free",
    "--port": "free",
    "--ws-port": "free",
    "--tls-port": "free",
    "--metrics-port": "free",
    "--metrics-host": "free",
    "--max-connections": "free",
    "--connect-timeout": "free",
    "--settle-outputs": "free",
    "--offer-lease": "free",
}
"""The kind of each flag declared below the command line (mam/process/options.py, mam/client/tls.py,
broker/, projector/cli.py, mam/process/metrics.py, web/cli.py), by name: one meaning wherever it appears."""


def complete(action: argparse.Action, kind: str) -> argparse.Action:
    """`action` with the completer of `kind` (a key of `COMPLETERS`)."""
    action.completer = COMPLETERS[kind]  # type: ignore[attr-defined]  # argcomplete reads this attribute
    return action


def complete_below(parser: argparse.ArgumentParser) -> None:
    """Give each flag of `parser` and its subcommands that has no completer yet the one `BELOW` names for it."""
    for child in subcommands(parser):
        complete_below(child)
    for action in actions(parser):
        if not is_subparsers(action) and getattr(action, "completer", None) is None:
            kind = next((BELOW[flag] for flag in action.option_strings if flag in BELOW), None)
            if kind is not None:
                complete(action, kind)


__all__ = ["BELOW", "COMPLETERS", "complete", "complete_below"]
