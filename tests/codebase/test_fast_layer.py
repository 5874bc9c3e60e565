"""The fast layer (`pytest -m fast`, docs/contributing.md) holds only tests that start no process and open no
connection: a test marked fast that does either fails, naming what it started."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from fast_support import FastTestReachedOut, no_processes_or_connections
from support import TESTS


class _Item:
    """What the guard reads of a collected test: its id and its marks."""

    def __init__(self, *marks: str) -> None:
        self.nodeid = "tests/x/test_x.py::test_x"
        self.marks = marks

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return getattr(pytest.mark, name).mark if name in self.marks else None


def _item(*marks: str) -> pytest.Item:
    return cast(pytest.Item, _Item(*marks))


def test_a_fast_test_that_starts_a_process_fails_naming_it_even_when_the_code_swallows_the_error() -> None:
    with pytest.raises(pytest.fail.Exception) as failed, no_processes_or_connections(_item("fast")):
        try:
            subprocess.run(["true", "--from-a-fast-test"], check=False)
        except Exception:  # code under test that hides errors cannot hide this one
            pass
    said = str(failed.value)
    assert said.startswith("tests/x/test_x.py::test_x is marked fast but started a subprocess (")
    assert "--from-a-fast-test" in said and "\n" not in said


def test_an_asyncio_subprocess_is_refused_too() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")

    with pytest.raises(pytest.fail.Exception, match="marked fast but started a subprocess"):
        with no_processes_or_connections(_item("fast")):
            with pytest.raises(FastTestReachedOut):
                asyncio.run(start())


def test_a_fast_test_that_connects_a_socket_fails_naming_the_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = server.getsockname()
        with pytest.raises(pytest.fail.Exception) as failed, no_processes_or_connections(_item("fast")):
            with socket.socket() as client:
                client.connect(address)
    assert f"marked fast but connected a socket to {address!r}" in str(failed.value)


def test_a_test_not_marked_fast_starts_processes_as_before() -> None:
    with no_processes_or_connections(_item("slow")):
        assert subprocess.run(["true"], check=False).returncode == 0


def test_a_test_marked_both_fast_and_slow_is_refused() -> None:
    with pytest.raises(pytest.fail.Exception, match="marked both fast and slow"):
        with no_processes_or_connections(_item("fast", "slow")):
            pass


def test_the_suites_hooks_fail_a_fast_test_that_starts_a_process(tmp_path: Path) -> None:
    """The guard is wired into the suite (tests/conftest.py): run pytest with it on a test that breaks the rule."""
    (tmp_path / "test_breaks_the_rule.py").write_text(
        "import subprocess\nimport pytest\n\npytestmark = pytest.mark.fast\n\n\n"
        "def test_starts_a_process() -> None:\n    subprocess.run(['true'], check=True)\n\n\n"
        "def test_stays_in_process() -> None:\n    assert sum(range(4)) == 6\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            "/dev/null",
            "--rootdir",
            str(tmp_path),
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "fast",
            str(tmp_path / "test_breaks_the_rule.py"),
        ],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(TESTS)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "test_starts_a_process is marked fast but started a subprocess (['true'])" in out, out
    assert "1 failed, 1 passed" in out, out
