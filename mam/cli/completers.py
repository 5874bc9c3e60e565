"""What shell completion offers for the flags that take a job, a status, an agent, a session, a label or an order.

`complete(action, kind)` gives an argparse action its completer (argcomplete calls `action.completer`
with the word typed so far and the arguments parsed before it, so `--workspace DIR` given earlier is
the workspace read). The values are `mam.registry.known_values`': files only, no broker. A flag with a
completer is never completed with file names (argcomplete's default for a flag without one).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

from mam.contract.record import Status
from mam.registry.ordering import SORT_FIELDS

Completer = Callable[..., list[str]]


def _workspace(parsed_args: argparse.Namespace | None) -> Any:
    from mam.process.options import workspace_from_args

    return workspace_from_args(parsed_args or argparse.Namespace())


def _statuses(prefix: str, **_: Any) -> list[str]:
    """Statuses; after a comma (`--status running,su`), the list so far with each status not in it yet."""
    done, _sep, last = prefix.rpartition(",")
    given = set(done.split(",")) if done else set()
    head = f"{done}," if done else ""
    return [head + status.value for status in Status if status.value not in given and status.value.startswith(last)]


def _from_workspace(values: Callable[[Any], list[str]]) -> Completer:
    def completer(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
        try:
            found = values(_workspace(parsed_args))
        except Exception:  # noqa: BLE001 - no workspace, an unreadable registry: nothing to offer, never a trace
            return []
        return [value for value in found if value.startswith(prefix)]

    return completer


def _job_ids(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
    from mam.registry.known_values import known_job_ids

    try:
        return known_job_ids(_workspace(parsed_args), prefix)
    except Exception:  # noqa: BLE001 - as above
        return []


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


def _orders(prefix: str, **_: Any) -> list[str]:
    return [f"{sign}{field}" for sign in ("", "-", "+") for field in SORT_FIELDS if f"{sign}{field}".startswith(prefix)]


COMPLETERS: Final[dict[str, Completer]] = {
    "job": _job_ids,
    "status": _statuses,
    "agent": _from_workspace(_agents),
    "session": _from_workspace(_sessions),
    "label": _from_workspace(_labels),
    "sort": _orders,
}
"""By kind: what `complete(action, kind)` attaches."""


def complete(action: argparse.Action, kind: str) -> argparse.Action:
    """`action` with the completer of `kind` (a key of `COMPLETERS`)."""
    action.completer = COMPLETERS[kind]  # type: ignore[attr-defined]  # argcomplete reads this attribute
    return action


__all__ = ["COMPLETERS", "complete"]
