"""mam.agents: the writers' library and the runner daemon, in separate modules.

The writers' library: `publisher.py` (the async `Publisher` API every front end publishes through:
`mam submit`, the dashboard, the MCP server, your program), with `resume.py`, `retrying.py`,
`answers.py`, `cancel_tree.py`, `sessions.py`. The runner daemon `mam-agent`: `runner.py` and what it
runs on (`supervisor.py`, `process.py`, `delivery.py`, `profiles.py`, ...), its command line
`runner_cli.py`. The writers' commands (`mam submit/cancel/retry/wait/ask`) are in mam/cli/."""

from mam.agents.publisher import Publisher, new_event_id, new_job_id

__all__ = ["Publisher", "new_event_id", "new_job_id"]
