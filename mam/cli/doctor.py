"""`mam doctor`: whether mam will work here, as a checklist with a fix per failed item.

The checks come from the layers that know each part: the workspace's files
(`mam.registry.doctor`), the broker and the projector (`mam.client.doctor`),
the agent CLIs (`mam.agents.doctor`, which `mam-agent` also runs at start).
Exit 0 when nothing failed (warnings included), 1 when a check failed, 2 on
a usage error (an unknown `--agent`).

What counts: the workspace, the broker and the projector always. Agents
named with `--agent` are checked strictly: their CLI missing, or a need of
theirs unmet (Gemini's trust, Codex's git repository, `full` as root), is a
failure. Without `--agent` every profile is listed, and an agent whose CLI
is absent shows as not installed (a skip), an unmet need as a warning: the
exit then depends on the workspace, the broker and the projector.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from mam.agents.permissions import LEVELS
from mam.cli.completers import complete
from mam.contract.checks import Check, any_failed, counts
from mam.contract.errors import EXIT_FAILED, EXIT_OK
from mam.contract.terminal import safe
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.options import add_broker_arg, add_workspace_args, broker_choice, workspace_from_args

_LABEL = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}


def register(sub: Subparsers) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check whether mam will work here: workspace files, broker, projector, agent CLIs",
        description="Check the workspace's files (modes, links, disk space), the broker and the projector (reachable, "
        "online, key) and each agent profile's CLI (installed, version, credentials, what the workspace and root "
        "need), with a one-line fix per failed item. Exit 0 when nothing failed, 1 when something did.",
    )
    complete(
        doctor.add_argument(
            "--agent",
            action="append",
            default=[],
            metavar="NAME",
            help="check this agent as its runner needs it (repeatable): its CLI missing or a need unmet "
            "fails (default: list every profile; an absent CLI shows as not installed)",
        ),
        "agent",
    )
    doctor.add_argument(
        "--permissions",
        choices=LEVELS,
        metavar="|".join(LEVELS),
        help="the ceiling the runners would have, as mam-agent --permissions (default edit)",
    )
    doctor.add_argument(
        "--worktree",
        action="store_true",
        help="the runners would use --worktree: the workspace must be a git repository with a commit",
    )
    doctor.add_argument(
        "--json",
        action="store_true",
        help="print {workspace, workspace_id, ok, counts, checks: [{name, status, detail, fix}]}",
    )
    add_workspace_args(doctor)
    add_broker_arg(doctor)
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    checks = run_checks(workspace, args)
    if args.json:
        print(
            json.dumps(
                {
                    "workspace": str(workspace.root),
                    "workspace_id": workspace.id,
                    "ok": not any_failed(checks),
                    "counts": counts(checks),
                    "checks": [_as_dict(c) for c in checks],
                },
                indent=2,
            )
        )
    else:
        print_checklist(workspace, checks)
    return EXIT_FAILED if any_failed(checks) else EXIT_OK


def run_checks(workspace: Workspace, args: argparse.Namespace) -> list[Check]:
    """Every check, in a stable order: workspace, git, profiles, broker and projector, then each agent's six."""
    import anyio

    from mam.agents.doctor import agent_checks, git_check, profile_setups
    from mam.client.doctor import broker_checks
    from mam.registry.doctor import workspace_checks

    listed, setups = profile_setups(workspace.root, args.agent, ceiling=args.permissions)  # first: a usage error
    brokers, source = broker_choice(args, workspace)
    wanted = (
        "--worktree"
        if args.worktree
        else next((f'profile {s.name} ("worktree": true)' for s in setups if s.strict and s.worktree), None)
    )
    git, in_git = git_check(workspace.root, wanted=wanted)
    with ThreadPoolExecutor(max_workers=4) as pool:  # each CLI's --version takes about a second: at once
        agents = [
            pool.submit(agent_checks, setup, root=workspace.root, workspace_id=workspace.id, in_git=in_git)
            for setup in setups
        ]
        checks = [*workspace_checks(workspace), git, listed, *anyio.run(broker_checks, workspace, brokers, source)]
        for future in agents:
            checks.extend(future.result())
    return checks


def _as_dict(check: Check) -> dict[str, str | None]:
    return {"name": check.name, "status": check.status, "detail": check.detail, "fix": check.fix}


def print_checklist(workspace: Workspace, checks: list[Check]) -> None:
    """One line per check (`FAIL  name  detail`), its fix under it. An agent's skipped checks other than
    its CLI's are left out (they follow from an absent CLI, or mam knows nothing to check); `--json` has them."""
    shown = [
        c for c in checks if not (c.status == "skip" and c.name.startswith("agent.") and not c.name.endswith(".cli"))
    ]
    width = max(len(c.name) for c in shown)
    out = sys.stdout
    print(f"mam doctor: workspace {safe(str(workspace.root))} (id {workspace.id})", file=out)
    for check in shown:
        print(f"{_LABEL[check.status]:<5} {check.name:<{width}}  {safe(check.detail, keep_layout=False)}", file=out)
        if check.fix:
            print(f"{'':<5} {'':<{width}}  fix: {safe(check.fix, keep_layout=False)}", file=out)
    found = counts(checks)
    verdict = "something mam needs is missing" if found["fail"] else "mam will work here"
    warnings = "1 warning" if found["warn"] == 1 else f"{found['warn']} warnings"
    print(f"{found['fail']} failed, {warnings}, {found['ok']} ok, {found['skip']} skipped: {verdict}", file=out)


__all__ = ["cmd_doctor", "print_checklist", "register", "run_checks"]
