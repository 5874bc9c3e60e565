"""What every job of one runner shares (`Settings`: the command line's `JobConfig` and the runner's means), the
ways a job can be made to end (`Ending`), and the command one job runs (`job_command`): the runner's argv with the
job's permission level and options."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from mam.agents.job_args import job_arguments, with_options
from mam.agents.job_broker import JobBroker
from mam.agents.job_env import ProfileEnv
from mam.agents.permissions import job_level, with_level
from mam.agents.profiles import render
from mam.contract import events as ev
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.git.worktree import Worktrees

log = logging.getLogger("mam.agent")

Put = Callable[[str, ev.AnyEvent, int], object]
"""The runner's outbox: (job id, event, the attempt it belongs to)."""


class Ending(Enum):
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"
    STOPPING = "runner stopping"
    """Handed back `failed`: a job submitted with `--no-requeue`, or one whose release was refused."""
    RELEASED = "released to the queue"
    """The runner stops before the job finished: `released`, and the agent stopped once the registry took it."""
    OVER_BUDGET = "over its budget"
    """The agent's stream reported more tokens or cost than the job's budget: `failed`, the reason naming it."""
    ENDED_ELSEWHERE = "ended in the registry"
    """The registry already holds an outcome (lost, or one someone else published): nothing more to report."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobConfig:
    """What the runner's command line sets for every job it runs (`RunnerSettings.job`, `runner_settings.py`)."""

    argv: list[str]
    """The agent's command (a profile's or `--command`'s), placeholders not yet rendered."""
    heartbeat: float
    kill_grace: float
    worktrees: Worktrees | None = None
    """With `--worktree`: each job runs in a git worktree of its own (`worktree.py`)."""
    output_format: str | None = None
    """The profile's `format`: the agent's stdout is read by that parser (`formats/`); None for a plain command."""
    permissions: dict[str, list[str]] | None = None
    """The profile's permission levels and their arguments (`permissions.py`); None: the command runs as it is."""
    ceiling: str | None = None
    """The runner's `--permissions`: the level of a job that asks none, and the most one may ask."""
    options: dict[str, list[str]] | None = None
    """The profile's job options: how its CLI takes a job's model, turn limit and resumed session (`job_args.py`)."""
    profile_env: ProfileEnv | None = None
    """The profile's variables for every job and per permission level (`job_env.py`)."""
    mcp: str | None = None
    """How the profile's CLI is given mam's own MCP server for each job (`job_mcp.py`); None: it is not."""
    idle_timeout: float | None = None
    """`mam-agent --idle-timeout`: a job whose agent makes no progress this long ends `timed_out` (`idle.py`);
    None: never."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(JobConfig):
    """What every job of one runner shares: its `JobConfig` and the runner's own means (`Settings.of`)."""

    workspace: Workspace
    runner_id: str
    put: Put
    room: Callable[[], Awaitable[None]]
    broker_url: str | None = None
    """The runner's broker list (credentials as given): a job gets it as `MAM_BROKER_URL` unless the runner's
    environment already sets one, so `mam ask`, `mam submit` and `mam mcp` inside a job reach the same brokers,
    also from a host other than the projector's. Unused when `job_broker` is given."""
    job_broker: JobBroker | None = None
    """What `MAM_BROKER_URL` a job gets (`mam-agent --job-login`): a login of its own where the broker takes one."""
    online: Callable[[], bool] = lambda: True
    """Whether the runner is connected to the broker now (a release made while it is not waits for no answer)."""

    @classmethod
    def of(
        cls,
        config: JobConfig,
        *,
        workspace: Workspace,
        runner_id: str,
        put: Put,
        room: Callable[[], Awaitable[None]],
        broker_url: str | None = None,
        job_broker: JobBroker | None = None,
        online: Callable[[], bool] = lambda: True,
    ) -> Settings:
        """`config` as given, with the runner's means: one list of the job options, `JobConfig`'s."""
        given: dict[str, Any] = {field.name: getattr(config, field.name) for field in fields(JobConfig)}
        return cls(
            **given,
            workspace=workspace,
            runner_id=runner_id,
            put=put,
            room=room,
            broker_url=broker_url,
            job_broker=job_broker,
            online=online,
        )


def job_command(record: JobRecord, settings: Settings) -> tuple[list[str] | str, str | None]:
    """The job's command, its permission level's arguments in place, or why it cannot run here; and the
    permission level it runs at (None for a command without levels, or when it is refused)."""
    asked = record.permissions or None
    level, refused = job_level(asked, settings.ceiling, runner=settings.runner_id)
    if refused is not None:
        return refused, None
    levels = settings.permissions or {}
    if level is not None and level not in levels:
        return (
            f"the job asks permissions {level!r} but runner {settings.runner_id}'s profile has no such "
            f"level (it has: {', '.join(levels)})"
        ), level
    template = with_level(settings.argv, levels.get(level, []) if level else [])
    own = job_arguments(record, settings.options, runner=settings.runner_id)
    if isinstance(own, str):
        return own, level
    extra, skipped = own
    if skipped:
        log.info("job %s: its command has no %s option; running without it", record.job_id, ", ".join(skipped))
    # rendered first: a job's own values (a session id) are never read as placeholders
    return with_options(render(template, job_id=record.job_id, workspace=settings.workspace.id), extra), level


__all__ = ["Ending", "JobConfig", "Put", "Settings", "job_command"]
