"""What tests share about a test's workspace: its paths (`ws`), and the switch that lets it take claims without
a runner key. Kept out of conftest.py (which holds fixtures only) so a module imports it as any helper."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mam.contract.workspace import Workspace
from mam.registry.runtime import read_runtime

UNSIGNED = "unsigned_runners"
"""A test (or module: `pytestmark = pytest.mark.unsigned_runners`) that publishes a runner's events by hand,
claims without a key: its `ws` takes unsigned runners (`allow_unsigned_runners`)."""


@dataclass(frozen=True)
class WorkspacePaths:
    root: Path
    elsewhere: Path

    @property
    def jobs(self) -> Path:
        return self.root / ".mam" / "jobs"

    @property
    def logs(self) -> Path:
        return self.root / ".mam" / "delegate_job_logs"


def allow_unsigned_runners(root: Path) -> None:
    """`<root>/.mam/config.json` says `"unsigned_runners": true` (kept beside what it says already): the
    workspace takes claims that name no runner key, as a client by hand makes them."""
    config = root / ".mam" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**data, UNSIGNED: True}))


def served_workspace(checkout: Path) -> bool:
    """Whether a `mam up` or `mam-projector` someone started serves the checkout as its workspace
    (the README's Quick start, beside the README's test command): its writes under `.mam/` are its own, not a
    test's. Read from the checkout's runtime file, as clients find the broker: a live pid on this host.
    Tests never reach that workspace: each resolves its own (`ws`, an empty cwd) and talks to no broker it
    did not start (`scrub_environment`)."""
    workspace = Workspace(
        root=checkout,
        id="checkout",
        registry_dir=checkout / ".mam" / "jobs",
        logs_dir=checkout / ".mam" / "delegate_job_logs",
    )
    return read_runtime(workspace) is not None
