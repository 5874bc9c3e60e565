"""mypy finds no error in mam as installed (`.ci/typecheck.py`, `[tool.mypy]` in pyproject.toml), so the
README's test command checks the types too. A cold run: about 15 s alone on 2 cores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TYPECHECK = Path(__file__).resolve().parent.parent / ".ci" / "typecheck.py"


def test_mypy_finds_no_error_in_the_installed_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(TYPECHECK), "--cache-dir", str(tmp_path / "mypy-cache")],
        capture_output=True, text=True, timeout=110, check=False,
    )
    assert done.returncode == 0, f"mypy (.venv/bin/python .ci/typecheck.py):\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout
