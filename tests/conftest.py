"""Fixtures: a clean environment, a private workspace per test, real brokers.

Before anything runs, every ambient `MAM_*`, `WORKSPACE_ROOT`,
`DELEGATE_JOB_LOGS_DIR` and `MAM_BROKER_URL` is dropped, so the suite can
never write into a real workspace or publish to a real broker.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from mam.contract.workspace import Workspace
from mam.registry.runtime import read_runtime

from brokers import BROKERS, RunningBroker
from support import CHECKOUT, processes_mentioning, scrub_environment, tree_snapshot

scrub_environment(os.environ)  # type: ignore[arg-type]
settings.register_profile("mam", database=None, deadline=None)
settings.load_profile("mam")

_CHECKOUT_SKIP = (".git", ".venv", ".venv-newest", "__pycache__", ".mam-ci", "build", ".ruff_cache", ".hypothesis", ".mypy_cache",
                  ".pytest_cache")


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


@pytest.fixture(autouse=True)
def guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run each test from an empty cwd of its own; fail if it or the checkout changes."""
    cwd = tmp_path / "caller-cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    served = served_workspace(CHECKOUT)
    before = tree_snapshot(CHECKOUT, _CHECKOUT_SKIP)
    yield cwd
    leaked = processes_mentioning(str(tmp_path))
    for pid in leaked:
        os.kill(pid, 9)
    assert not leaked, f"the test left processes running: {leaked}"
    after = tree_snapshot(CHECKOUT, _CHECKOUT_SKIP)
    if served or served_workspace(CHECKOUT):  # a Quick start's `mam up` writes there meanwhile
        before, after = ({k: v for k, v in snap.items() if not k.startswith(".mam/")} for snap in (before, after))
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"the test wrote into the checkout: {changed[:10]}"
    assert not list(cwd.iterdir()), f"the test wrote into the caller's cwd: {list(cwd.iterdir())}"


def served_workspace(checkout: Path) -> bool:
    """Whether a `mam up` or `mam-projector` someone started serves the checkout as its workspace
    (the README's Quick start, beside the README's test command): its writes under `.mam/` are its own, not a
    test's. Read from the checkout's runtime file, as clients find the broker: a live pid on this host.
    Tests never reach that workspace: each resolves its own (`ws`, an empty cwd) and talks to no broker it
    did not start (`scrub_environment`)."""
    workspace = Workspace(root=checkout, id="checkout", registry_dir=checkout / ".mam" / "jobs",
                          logs_dir=checkout / ".mam" / "delegate_job_logs")
    return read_runtime(workspace) is not None


UNSIGNED = "unsigned_runners"
"""A test (or module: `pytestmark = pytest.mark.unsigned_runners`) that publishes a runner's events by hand,
claims without a key: its `ws` takes unsigned runners (`allow_unsigned_runners`)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{UNSIGNED}: the test's workspace takes claims without a runner key")
    config.addinivalue_line(
        "markers", "slow: a scenario that takes tens of seconds: left out of the default run; `pytest -m slow` and CI run it"
    )


def allow_unsigned_runners(root: Path) -> None:
    """`<root>/.mam/config.json` says `"unsigned_runners": true` (kept beside what it says already): the
    workspace takes claims that name no runner key, as a client by hand makes them."""
    config = root / ".mam" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**data, UNSIGNED: True}))


@pytest.fixture
def ws(tmp_path: Path, request: pytest.FixtureRequest) -> WorkspacePaths:
    root = tmp_path / "workspace"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if request.node.get_closest_marker(UNSIGNED) is not None:
        allow_unsigned_runners(root)
    return WorkspacePaths(root=root, elsewhere=elsewhere)


@pytest.fixture(scope="session")
def amqtt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with BROKERS["amqtt"](tmp_path_factory.mktemp("amqtt")) as broker:
        yield broker


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with BROKERS["mosquitto"](tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture(scope="session")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with BROKERS["nats"](tmp_path_factory.mktemp("nats")) as broker:
        yield broker


@pytest.fixture(params=["amqtt", "mosquitto", "nats"])
def broker(request: pytest.FixtureRequest) -> RunningBroker:
    """Each real broker in turn (session-scoped; tests isolate by workspace id)."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs to fill up (skips where mounting needs a root this test does not have)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.decode().strip()}); needs root or CAP_SYS_ADMIN")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
