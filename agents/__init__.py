"""mam.agents: the writers' library and the runner daemon, in separate modules.

The writers' library: `publisher.py` (the async `Publisher` API every front end publishes through:
`mam submit`, the dashboard, the MCP server, your program), with `resume.py`, `retrying.py`,
`answers.py`, `cancel_tree.py`, `sessions.py`. The runner daemon `mam-agent`: `runner.py` and what it
runs on (`supervisor.py`, `process.py`, `delivery.py`, `profiles.py`, ...), its command line
`runner_cli.py`. The writers' commands (`mam submit/cancel/retry/wait/ask`) are in mam/cli/."""

from typing import TYPE_CHECKING

from mam import lazy_exports

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher, new_event_id, new_job_id


__getattr__ = lazy_exports(__name__, dict.fromkeys(["Publisher", "new_event_id", "new_job_id"], "mam.agents.publisher"))
"""`from mam.agents import Publisher` imports the publisher then; importing another module of this package
(`mam.agents.names`, say) loads only what that module imports."""


__all__ = ["Publisher", "new_event_id", "new_job_id"]
