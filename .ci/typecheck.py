"""Type-check mam as installed: mypy reads every module once, under its `mam.*` name.

setuptools installs `projector/` as `mam.projector` (and `broker/`, `agents/`, `web/`, `mcp_server/` likewise:
setup.py's `ROOTS`). The editable install reaches them through an import hook,
which mypy does not run, and mypy pointed at the folders names them `projector.*`, so every `mam.projector`
import would go unchecked. This lays the installed tree out as symlinks (as setuptools' strict editable mode
does) in mypy's cache directory, runs `mypy -p mam` there with pyproject.toml's `[tool.mypy]`, and prints each
error at its path in the checkout. Exits with mypy's status (0: no errors).

    .venv/bin/python .ci/typecheck.py [--cache-dir DIR] [other mypy options]

The cache defaults to `.mypy_cache/` in the checkout (ignored by git); a second run takes about a second.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def package_dirs(setup_py: Path) -> dict[str, Path]:
    """Each mapped package's name and its folder in the checkout, e.g. `mam.projector`: `projector/` (setup.py's
    `ROOTS`, read without running setup.py)."""
    tree = ast.parse(setup_py.read_text())
    (mapping,) = (
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["ROOTS"]
    )
    return {name: (setup_py.parent / folder).resolve() for name, folder in mapping.items()}


def lay_out(packages: dict[str, Path], tree: Path) -> None:
    """`tree/mam/...` as installed: a package with mapped children is a folder of links to its own files plus
    its children; any other package is one link to its folder."""
    shutil.rmtree(tree, ignore_errors=True)
    for name, source in sorted(packages.items()):  # a parent before its children
        target = tree.joinpath(*name.split("."))
        if not any(other.startswith(name + ".") for other in packages):
            target.symlink_to(source, target_is_directory=True)
            continue
        target.mkdir(parents=True)
        for child in source.iterdir():
            if f"{name}.{child.name}" not in packages:
                (target / child.name).symlink_to(child)


def to_checkout(line: str, packages: dict[str, Path]) -> str:
    """mypy's `mam/projector/service.py:12: ...` as `projector/service.py:12: ...` (the file to open)."""
    for name in sorted(packages, key=len, reverse=True):
        prefix = name.replace(".", "/") + "/"
        if line.startswith(prefix):
            return os.path.relpath(packages[name], CHECKOUT) + "/" + line[len(prefix) :]
    return line


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache-dir", type=Path, default=CHECKOUT / ".mypy_cache")
    known, mypy_options = parser.parse_known_args(argv)
    cache: Path = known.cache_dir.resolve()
    packages = package_dirs(CHECKOUT / "setup.py")
    tree = cache / "installed"
    lay_out(packages, tree)
    command = [sys.executable, "-m", "mypy", "--config-file", str(CHECKOUT / "pyproject.toml")]
    command += ["--cache-dir", str(cache), *mypy_options, "-p", "mam"]
    done = subprocess.run(
        command, cwd=tree, env={**os.environ, "MYPYPATH": str(tree)}, capture_output=True, text=True, check=False
    )
    for line in done.stdout.splitlines():
        print(to_checkout(line, packages))
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
