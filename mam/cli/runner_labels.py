"""The labels the workspace's runners offer, for `mam submit --require` completion.

A runner's labels live only in its retained status on the broker (nothing on disk holds them), so this
asks the broker that serves the workspace, as kubectl's completion asks its API server: only when the
workspace's runtime file names a live `mam up` or projector on this host, and for at most `BUDGET`
seconds, so a TAB never hangs on a broker that is down. Nothing found is an empty list, never an error.
"""

from __future__ import annotations

from typing import Final

from mam.contract.workspace import Workspace

BUDGET: Final = 0.5
"""Seconds a completion may spend asking the broker."""


def runner_labels(workspace: Workspace) -> list[str]:
    """`key=value` for every label of a runner whose status the broker retains, A to Z."""
    from mam.registry.runtime import read_runtime

    runtime = read_runtime(workspace)
    if runtime is None:
        return []
    import anyio

    from mam.client.live import snapshot_agents_within
    from mam.contract.broker_list import parse_brokers
    from mam.contract.topics import Topics

    try:
        statuses = anyio.run(snapshot_agents_within, parse_brokers(runtime.broker), Topics(workspace.id), BUDGET)
    except Exception:  # noqa: BLE001 - a broker that refuses, a login needed: nothing to offer, never a trace
        return []
    pairs = {
        (key, value)
        for status in (statuses or {}).values()
        if isinstance(status.labels, dict)
        for key, value in status.labels.items()
    }
    return [f"{key}={value}" for key, value in sorted(pairs)]
