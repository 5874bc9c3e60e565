"""mam.agents: the writers' library and the runner daemon, in separate modules.

The writers' library: `publisher.py` (the async `Publisher` API every front end publishes through:
`mam submit`, the dashboard, the MCP server, your program), with `resume.py`, `retrying.py`,
`answers.py`, `cancel_tree.py`, `sessions.py`. The runner daemon `mam-agent`: `runner.py` and what it
runs on (`supervisor.py`, `process.py`, `delivery.py`, `profiles.py`, ...), its command line
`runner_cli.py`. The writers' commands (`mam submit/cancel/retry/wait/ask`) are in mam/cli/."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher, new_event_id, new_job_id


def __getattr__(name: str) -> Any:
    """`from mam.agents import Publisher` works as ever, importing the publisher at that first use:
    importing any module of this package (`mam.agents.names`, say) loads only what that module imports."""
    if name in __all__:
        return getattr(importlib.import_module("mam.agents.publisher"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Publisher", "new_event_id", "new_job_id"]
