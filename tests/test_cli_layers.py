"""The layers of the `mam` package (issue 24, "The CLI gets a room of its own"): nothing under mam/ but the
command line (mam/cli/) imports the packages above it, and `mam --version` / `mam jobs` do not load the
broker, the dashboard, the projector, the runner or the MCP SDK."""

from __future__ import annotations

import argparse
import ast
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from mam.cli import build_parser
from mam.cli.commands import COMMAND_GROUPS

from conftest import CHECKOUT, WorkspacePaths
from e2e import write_job
from support import child_env, run

MAM_DIR = CHECKOUT / "mam"
UPPER = ("mam.agents", "mam.projector", "mam.broker", "mam.web", "mam.mcp_server")
"""The packages that compose mam's contract and readers into processes (pyproject's package-dir)."""
HEAVY = (*UPPER, "amqtt", "mcp", "starlette", "uvicorn")


def _module_name(path: Path) -> str:
    parts = path.relative_to(CHECKOUT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module `source` imports, at its top or inside a function: `import a.b`, `from a import b`
    (both `a` and `a.b`, since b may be a module), relative imports resolved, `importlib.import_module("x")`."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def upward_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """The imports of `source` that reach a package above mam's contract and readers."""
    return sorted(name for name in imported_modules(source, module, is_package=is_package)
                  if any(name == upper or name.startswith(upper + ".") for upper in UPPER))


def test_the_checker_finds_an_upward_import_in_every_spelling() -> None:
    spellings = {
        "from mam.agents.publisher import Publisher": "mam.agents.publisher",
        "import mam.broker.server": "mam.broker.server",
        "def f():\n    from mam import web\n": "mam.web",
        "from ..projector import service": "mam.projector",
        "import importlib\nimportlib.import_module('mam.mcp_server.cli')": "mam.mcp_server.cli",
    }
    for source, expected in spellings.items():
        assert expected in upward_imports(source, "mam.registry.reading"), source
    assert upward_imports("from mam.contract import events\nimport mam.git.worktree", "mam.registry.reading") == []


def test_nothing_under_mam_but_the_cli_imports_the_packages_above_it() -> None:
    checked, offending = 0, {}
    for path in sorted(MAM_DIR.rglob("*.py")):
        if path.is_relative_to(MAM_DIR / "cli"):
            continue
        found = upward_imports(path.read_text(encoding="utf-8"), _module_name(path),
                               is_package=path.name == "__init__.py")
        checked += 1
        if found:
            offending[str(path.relative_to(CHECKOUT))] = found
    assert checked > 40  # the walk saw the package, not an empty directory
    assert offending == {}


LAYERS: dict[str, tuple[str, ...]] = {
    "contract": ("contract",),
    "registry": ("contract", "registry"),
    "client": ("contract", "registry", "client"),
    "git": ("contract", "registry", "git"),
}
"""What each of mam's lower subpackages may import of mam (mam.cli, on top, may import them all)."""


def test_each_layer_of_mam_imports_only_the_layers_below_it() -> None:
    crossing: dict[str, list[str]] = {}
    seen = set()
    for path in sorted(MAM_DIR.rglob("*.py")):
        module = _module_name(path)
        layer = module.split(".")[1] if module.count(".") else ""
        if layer not in LAYERS:
            continue
        seen.add(layer)
        for name in imported_modules(path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py"):
            parts = name.split(".")
            if parts[0] == "mam" and len(parts) > 1 and parts[1] not in LAYERS[layer] and name != "mam.__version__":
                crossing.setdefault(module, []).append(name)
    assert seen == set(LAYERS)
    assert crossing == {}


_DUMP_MODULES = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
from mam.cli import main
main()
"""
"""`mam ARGS` as the console script runs it (`from mam.cli import main; main()`), writing at exit the
modules it imported (sys.modules: also those `importlib.import_module` loads, which `-X importtime` omits)."""


async def _imports_of(ws: WorkspacePaths, *args: str) -> tuple[str, set[str]]:
    out = ws.root.parent / "modules.json"
    out.unlink(missing_ok=True)
    done = await run([sys.executable, "-c", _DUMP_MODULES, *args], cwd=ws.elsewhere,
                     env=child_env(MODULES_OUT=str(out)))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode(), set(json.loads(out.read_text()))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == heavy or m.startswith(heavy + ".") for heavy in HEAVY))


async def test_version_and_jobs_do_not_load_the_broker_dashboard_projector_or_mcp(ws: WorkspacePaths) -> None:
    write_job(ws, "layers-1")
    out, modules = await _imports_of(ws, "--version")
    assert out.strip() == "mam 0.1.0" and "mam.cli" in modules
    assert _heavy(modules) == []
    out, modules = await _imports_of(ws, "jobs", "--workspace", str(ws.root))
    assert "layers-1" in out and "mam.cli.jobs" in modules
    assert _heavy(modules) == []
    out, modules = await _imports_of(ws, "--help")
    assert "schema" in out and _heavy(modules) == []
    # the same reading sees them where a command needs them: `mam up` composes broker and projector
    out, modules = await _imports_of(ws, "up", "--help")
    assert "--dashboard" in out and {"mam.broker", "mam.projector", "amqtt"} <= modules


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {action.dest: action.help for action in sub._choices_actions}  # noqa: SLF001


def test_the_lazy_table_names_every_command_with_the_help_its_module_registers() -> None:
    full = _help_lines(build_parser())
    table = {name: text for group in COMMAND_GROUPS for name, text in group.helps.items()}
    assert table == full
    assert list(_help_lines(build_parser(lazy=True))) == list(full)
    assert build_parser(lazy=True).format_help() == build_parser().format_help()


@pytest.mark.parametrize("command", [name for group in COMMAND_GROUPS for name in group.helps])
def test_a_command_parsed_lazily_has_the_flags_and_help_of_the_full_parser(command: str) -> None:
    outputs = []
    for lazy in (True, False):
        buffer = io.StringIO()
        with redirect_stdout(buffer), pytest.raises(SystemExit) as exited:
            build_parser(lazy=lazy).parse_args([command, "--help"])
        assert exited.value.code == 0
        outputs.append(buffer.getvalue())
    assert outputs[0] == outputs[1] and f"usage: mam {command}" in outputs[0]


async def test_argcomplete_finds_its_marker_where_the_mam_entry_point_lives(ws: WorkspacePaths) -> None:
    """Global completion (`activate-global-python-argcomplete`) completes `mam` only if the module of its
    console script (`mam.cli:main`: mam/cli/__init__.py) holds PYTHON_ARGCOMPLETE_OK in its first 1024
    characters; argcomplete's own check, run as its shell script runs it, says so."""
    assert "PYTHON_ARGCOMPLETE_OK" in (MAM_DIR / "cli" / "__init__.py").read_text(encoding="utf-8")[:1024]
    check = [sys.executable, "-W", "ignore", "-m", "argcomplete._check_console_script"]
    done = await run([*check, str(Path(sys.executable).parent / "mam")], cwd=ws.elsewhere)
    assert done.returncode == 0, done.stderr.decode()
    # the same reading fails on a module without the marker
    done = await run([sys.executable, "-m", "argcomplete._check_module", "mam.contract.events"], cwd=ws.elsewhere)
    assert done.returncode != 0 and b"marker not found" in done.stderr
