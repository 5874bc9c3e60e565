"""Agent sessions: `mam session create` registers a session by submitting its onboarding job.

A session is the jobs that share an `agent_session`; its onboarding job carries
the role's briefing as the prompt and the label `mam.kind=onboarding`, the
way a multiplexer-driven setup opens a new agent pane. Briefings come from
`<workspace>/.mam/roles/<role>.md` when present, else a generic one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace

ONBOARDING_LABEL = ("mam.kind", "onboarding")

GENERIC_BRIEFING = """You are the {role} agent of session {session} in workspace {workspace} ({root}).
Other agents delegate jobs to you through mam. Read the workspace's README and
contributing notes, then wait for jobs addressed to agent {agent}. When you
delegate in turn, submit jobs with `mam submit --parent <your job id>`.
"""


def briefing(workspace: Workspace, *, role: str, session: str, agent: str) -> str:
    path = workspace.root / ".mam" / "roles" / f"{role}.md"
    template = path.read_text(encoding="utf-8") if path.is_file() else GENERIC_BRIEFING
    return (
        template.replace("{role}", role)
        .replace("{session}", session)
        .replace("{agent}", agent)
        .replace("{workspace}", workspace.id)
        .replace("{root}", str(workspace.root))
    )


@dataclass
class Session:
    name: str
    agent: str | None = None
    role: str | None = None
    onboarding: str | None = None
    jobs: list[JobRecord] = field(default_factory=list)


def sessions(records: Iterable[JobRecord]) -> list[Session]:
    found: dict[str, Session] = {}
    for record in sorted(records, key=lambda r: (r.submitted_at, r.job_id)):
        if not record.agent_session:
            continue
        session = found.setdefault(record.agent_session, Session(record.agent_session))
        session.jobs.append(record)
        if record.labels.get(ONBOARDING_LABEL[0]) == ONBOARDING_LABEL[1] and session.onboarding is None:
            session.onboarding, session.agent, session.role = record.job_id, record.agent, record.role
        session.agent = session.agent or record.agent
        session.role = session.role or record.role
    return list(found.values())
