"""mypy finds no error in mam as installed (`.ci/typecheck.py`, `[tool.mypy]` in pyproject.toml), so the
README's test command checks the types too. A cold run takes about 5 s of CPU (6-20 s on a shared 2-core machine;
once 75 s while its disk was busy): the timeouts only catch a hang."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import CHECKOUT

TYPECHECK = CHECKOUT / ".ci" / "typecheck.py"


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_mypy_finds_no_error_in_the_installed_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(TYPECHECK), "--cache-dir", str(tmp_path / "mypy-cache")],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, f"mypy (.venv/bin/python .ci/typecheck.py):\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout
