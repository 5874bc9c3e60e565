"""bench/paths.py: its publishers' shares keep each job's events in order and cover every event once, and
a bad argument is one line naming what was typed (exit 2), before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import CHECKOUT

sys.path.insert(0, str(CHECKOUT / "bench"))

from paths import Workload, jobs_workload, output_workload  # noqa: E402


@pytest.mark.fast
@given(jobs=st.integers(1, 40), lines=st.integers(1, 300), publishers=st.integers(1, 120))
def test_each_share_keeps_its_jobs_order_and_all_events_are_dealt_once(jobs: int, lines: int, publishers: int) -> None:
    for work in (jobs_workload(jobs), output_workload(lines)):
        shares = work.split(publishers)
        assert 1 <= len(shares) <= publishers
        dealt = [event for share in shares for event in share]
        assert sorted(dealt) == sorted((job, e) for job, stream in work.streams.items() for e in stream)
        for share in shares:
            for job in {j for j, _ in share}:
                assert [e for j, e in share if j == job] == work.streams[job]
        assert all(
            len({j for j, _ in share} & {j for j, _ in other}) == 0
            for i, share in enumerate(shares)
            for other in shares[i + 1 :]
        )


@pytest.mark.fast
def test_workload_counts_its_events() -> None:
    assert Workload("w", {"a": [b"1", b"2"], "b": [b"3"]}).events == 3


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        (["--publishers", "0"], "--publishers '0'"),
        (["--publishers", "x"], "--publishers 'x'"),
        (["--paths", "nats"], "--paths 'nats'"),
        (["--workload", "flood"], "--workload 'flood'"),
        (["--rounds", "0"], "--rounds"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(flag: list[str], said: str) -> None:
    result = subprocess.run(
        [sys.executable, str(CHECKOUT / "bench" / "paths.py"), *flag], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert said in result.stderr and "Traceback" not in result.stderr
