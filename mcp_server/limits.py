"""`submit_job`'s continuation: `resume` (as `mam submit --resume`).

The arguments themselves come from the job spec (`mam.contract.job_spec`);
`resume`'s checks are the CLI's (`agents/resume.py`): a finished job of
the same agent whose agent recorded a session id, on a profile that can resume.
"""

from __future__ import annotations

from typing import Any

from mam.agents.publisher import Publisher
from mam.agents.resume import resume_fields
from mam.mcp_server.served import Served


async def resumed(pub: Publisher, served: Served, job: str | None, agent: str) -> dict[str, Any]:
    """`resumes` and `resume_session` for a job continuing `job`'s session; {} without one."""
    if job is None:
        return {}
    old_id = await served.job_id(job)
    _, fields = resume_fields(await pub.state(old_id), old_id, agent, served.workspace.root)
    return fields


__all__ = ["resumed"]
