"""The wheel holds every module and data file the tree holds: packages are found (setup.py), not listed.

An editable install imports whatever is in the tree, so a subpackage missing from a hand-written list
passed every other test and was missing from `pip wheel .` (issue 44). The wheel is built from a copy of
the tree (nothing lands in the checkout), as a user's `pip install .` builds it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support import CHECKOUT

ROOTS = {
    "mam": "mam",
    "broker": "mam/broker",
    "agents": "mam/agents",
    "projector": "mam/projector",
    "web": "mam/web",
    "mcp_server": "mam/mcp_server",
}
"""Each top-level directory and the package it is installed as (setup.py's `ROOTS`)."""


def tree_files() -> set[str]:
    """Every module and shipped data file in the tree, named as the wheel names it."""
    found = set()
    for directory, package in ROOTS.items():
        for path in (CHECKOUT / directory).rglob("*"):
            rel = path.relative_to(CHECKOUT / directory)
            if "__pycache__" in rel.parts or not path.is_file():
                continue
            if path.suffix == ".py" or rel.parts[0] == "static" or path.name in ("profiles.json", "py.typed"):
                found.add(f"{package}/{rel.as_posix()}")
    return found


def test_the_wheel_holds_every_module_of_the_tree(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "__pycache__", "tests", "bench", "build", "*.egg-info", ".mam", ".hypothesis", ".*_cache"
        ),
    )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("mam-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if not name.startswith("mam-")}
    expected = tree_files()
    assert expected - shipped == set(), "in the tree, not in the wheel"
    assert {n for n in shipped - expected if n.endswith(".py")} == set(), "in the wheel, not in the tree"
    assert len([n for n in shipped if n.endswith(".py")]) > 250
