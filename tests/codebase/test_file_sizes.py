"""Small modules (issue 32, "Small parts"; docs/contributing.md): no source file over 400 lines.

Source is every `*.py` outside tests/ and virtual environments (.ci/ included), and the dashboard's
`web/static/*.js`. A file that grows past the limit is split by responsibility (docs/contributing.md, Layout).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import CHECKOUT

pytestmark = pytest.mark.fast

LIMIT = 400
_SKIPPED = {"tests", ".venv", "venv", "node_modules", "build", "dist"}


def _sources() -> list[Path]:
    found: list[Path] = []
    for top, dirs, files in os.walk(CHECKOUT):
        dirs[:] = [d for d in dirs if d not in _SKIPPED and (not d.startswith(".") or d == ".ci")]
        found += [Path(top, name) for name in files if name.endswith(".py")]
    return sorted([*found, *(CHECKOUT / "web" / "static").glob("*.js")])


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_source_file_is_over_400_lines() -> None:
    sources = _sources()
    assert CHECKOUT / "agents" / "runner.py" in sources and CHECKOUT / "web" / "static" / "app.js" in sources
    over = {str(path.relative_to(CHECKOUT)): _lines(path) for path in sources if _lines(path) > LIMIT}
    assert not over, f"over {LIMIT} lines (split by responsibility, docs/contributing.md): {over}"
