"""Fixtures: a clean environment, a private workspace per test, real brokers.

Before anything runs, every ambient `MAM_*`, `WORKSPACE_ROOT`,
`DELEGATE_JOB_LOGS_DIR` and `MAM_BROKER_URL` is dropped, so the suite can
never write into a real workspace or publish to a real broker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_full_support import tmpfs
from hypothesis import settings

from brokers import BROKERS, RunningBroker
from fast_support import MARKER_HELP, no_processes_or_connections
from support import CHECKOUT, processes_mentioning, scrub_environment, tree_snapshot
from workspace_support import UNSIGNED, WorkspacePaths, allow_unsigned_runners, served_workspace

# Re-exported for modules written before the helpers moved to workspace_support.py (import them from there).
__all__ = ["CHECKOUT", "UNSIGNED", "WorkspacePaths", "allow_unsigned_runners", "served_workspace"]

scrub_environment(os.environ)  # type: ignore[arg-type]
settings.register_profile("mam", database=None, deadline=None)
settings.load_profile("mam")

_CHECKOUT_SKIP = (
    ".git",
    ".venv",
    ".venv-newest",
    "__pycache__",
    ".mam-ci",
    "build",
    ".ruff_cache",
    ".hypothesis",
    ".mypy_cache",
    ".pytest_cache",
)


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.addinivalue_line("markers", f"{UNSIGNED}: the test's workspace takes claims without a runner key")
    config.addinivalue_line(
        "markers",
        "slow: a scenario that takes tens of seconds: left out of the default run; `pytest -m slow` and CI run it",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with no_processes_or_connections(item):  # a fast test's fixtures start no broker either
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with no_processes_or_connections(item):
        return (yield)


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
    with tmpfs(tmp_path / "small-disk", "512k") as mount:
        yield mount
