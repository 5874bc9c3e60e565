"""bench/fanout.py refuses a bad argument in one line naming what was typed (exit 2), before any broker starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import CHECKOUT


@pytest.mark.parametrize(
    ("flag", "said"),
    [(["--messages", "0"], "got 0"), (["--rounds", "x"], "--rounds"), (["--before", "/nowhere"], "'/nowhere'")],
)
def test_a_bad_argument_is_one_line_and_exit_2(flag: list[str], said: str) -> None:
    result = subprocess.run(
        [sys.executable, str(CHECKOUT / "bench" / "fanout.py"), *flag], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert said in result.stderr and "Traceback" not in result.stderr
