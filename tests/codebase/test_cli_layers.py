"""The layers of mam (issue 24, "The CLI gets a room of its own"; issue 32, "Layers without cycles"): the
package graph has no cycle and each package imports only the layers below it (docs/contributing.md,
Layers); nothing under mam/ but the command line (mam/cli/) imports the packages above it; importing the
library loads no command line; `mam --version` / `mam jobs` do not load the broker, the dashboard, the
projector, the runner or the MCP SDK, and the read-only commands no MQTT client, TLS or cryptography."""

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
from mam.contract import events as ev
from mam.process.argparse_internals import command_lines, subparsers_of

from e2e import write_job
from support import CHECKOUT, child_env, run
from workspace_support import WorkspacePaths

MAM_DIR = CHECKOUT / "mam"
UPPER = ("mam.agents", "mam.projector", "mam.broker", "mam.web", "mam.mcp_server")
"""The packages that compose mam's contract and readers into processes (setup.py's ROOTS)."""
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
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def upward_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """The imports of `source` that reach a package above mam's contract and readers."""
    return sorted(
        name
        for name in imported_modules(source, module, is_package=is_package)
        if any(name == upper or name.startswith(upper + ".") for upper in UPPER)
    )


@pytest.mark.fast
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


@pytest.mark.fast
def test_nothing_under_mam_but_the_cli_imports_the_packages_above_it() -> None:
    checked, offending = 0, {}
    for path in sorted(MAM_DIR.rglob("*.py")):
        if path.is_relative_to(MAM_DIR / "cli"):
            continue
        if path == MAM_DIR / "__init__.py":  # `mam.Publisher`, the public face: imported at its first use only
            continue  # (tests/agents/test_publisher_face.py holds `import mam` to loading no package above)
        found = upward_imports(
            path.read_text(encoding="utf-8"), _module_name(path), is_package=path.name == "__init__.py"
        )
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
    "process": ("contract", "registry", "client", "process"),
}
"""What each of mam's lower subpackages may import of mam (mam.cli, on top, may import them all)."""


@pytest.mark.fast
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
    done = await run(
        [sys.executable, "-c", _DUMP_MODULES, *args], cwd=ws.elsewhere, env=child_env(MODULES_OUT=str(out))
    )
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


SOURCE_ROOTS = {
    "mam": "mam",
    "agents": "mam.agents",
    "broker": "mam.broker",
    "projector": "mam.projector",
    "web": "mam.web",
    "mcp_server": "mam.mcp_server",
}
"""Each source folder of the checkout and the package it is installed as (setup.py's ROOTS)."""

PACKAGE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("mam.contract",),
    ("mam.registry",),
    ("mam.client", "mam.git"),
    ("mam.process",),
    ("mam.broker", "mam.projector"),
    ("mam.agents",),
    ("mam.web", "mam.mcp_server"),
    ("mam.cli",),
)
"""mam's packages from the bottom up, as docs/contributing.md (Layers) draws them: a package imports only
packages of the layers below its own (lazily inside a function too), never one beside or above it."""


def _package_of(module: str) -> str | None:
    """The package of PACKAGE_LAYERS `module` belongs to; None for what is not mam's, and for `mam`
    itself (its `__version__`, the lazy names of its `__init__`, the old `mam.runtime`/`mam.workspace`)."""
    parts = module.split(".")
    if parts[0] != "mam" or len(parts) < 2:
        return None
    package = f"mam.{parts[1]}"
    return package if any(package in layer for layer in PACKAGE_LAYERS) else None


def package_imports() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) package pairs of the whole source, each with the modules that import so."""
    edges: dict[tuple[str, str], list[str]] = {}
    for folder, installed in SOURCE_ROOTS.items():
        for path in sorted((CHECKOUT / folder).rglob("*.py")):
            parts = path.relative_to(CHECKOUT / folder).with_suffix("").parts
            module = ".".join([installed, *(parts[:-1] if parts[-1] == "__init__" else parts)])
            source = _package_of(module)
            if source is None:
                continue
            for name in imported_modules(
                path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py"
            ):
                target = _package_of(name)
                if target is not None and target != source:
                    edges.setdefault((source, target), []).append(f"{module} imports {name}")
    return edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Every cycle of the directed graph `edges`, each once, as the nodes along it."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found: list[list[str]] = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.append([*path, start])
            elif nxt > start and nxt not in path:  # each cycle once: from its smallest node
                walk(start, nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


@pytest.mark.fast
def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import() -> None:
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c", "a"]]
    assert cycles({("a", "b"), ("b", "c"), ("a", "c")}) == []
    lazy = "def later():\n    from mam.cli.submit import run_submit\n"
    assert "mam.cli.submit" in imported_modules(lazy, "mam.agents.publisher")


@pytest.mark.fast
def test_the_package_graph_has_no_cycle_and_each_package_imports_only_the_layers_below() -> None:
    edges = package_imports()
    assert {package for pair in edges for package in pair} == {p for layer in PACKAGE_LAYERS for p in layer}
    assert cycles(set(edges)) == []
    rank = {package: n for n, layer in enumerate(PACKAGE_LAYERS) for package in layer}
    upward = {f"{a} -> {b}": why[:3] for (a, b), why in edges.items() if rank[b] >= rank[a]}
    assert upward == {}


_LOADS_NO_CLI = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m == "mam.cli" or m.startswith("mam.cli."))))
"""

LIBRARY = (
    "mam.agents.publisher",
    "mam.agents.runner",
    "mam.projector.service",
    "mam.broker.server",
    "mam.web.app",
    "mam.mcp_server.server",
)
"""The Python API and the servers' modules: what a program embedding mam imports."""


async def test_importing_the_library_loads_no_command_line(ws: WorkspacePaths) -> None:
    done = await run([sys.executable, "-c", _LOADS_NO_CLI, *LIBRARY], cwd=ws.elsewhere)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout) == []


NETWORK = ("aiomqtt", "paho", "ssl", "_ssl", "cryptography")
"""The MQTT client, TLS and cryptography: what a command that only reads files has no use for."""


def _network(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in NETWORK)


async def test_read_only_commands_load_no_mqtt_client_tls_or_cryptography(ws: WorkspacePaths) -> None:
    write_job(ws, "diet-1")
    write_job(
        ws,
        "diet-2",
        ev.Claimed(runner="r1", id="diet-2-c"),
        ev.Started(runner="r1", id="diet-2-st"),
        ev.Output(text="first line\nlast line\n", seq=0, id="diet-2-o"),
        ev.Succeeded(result="done", id="diet-2-ok"),
    )
    write_job(
        ws,
        "diet-3",
        ev.Claimed(runner="r1", id="diet-3-c"),
        ev.Started(runner="r1", id="diet-3-st"),
        ev.Failed(exit_code=-9, id="diet-3-x"),
    )
    where = ["--workspace", str(ws.root)]
    # only `mam show` of a job still queued asks the broker which runners could take it (mam/cli/show_routing.py);
    # the text form of any other job (its output's tail, its parent and children too) reads the registry alone
    for command in (
        ["jobs"],
        ["show", "diet-1", "-o", "json"],
        ["show", "diet-2"],
        ["show", "diet-3"],
        ["show", "diet-2", "-o", "yaml"],
        ["logs", "diet-1"],
        ["events", "diet-1"],
        ["logs", "diet-1", "--tail", "1"],
        ["jobs", "tree"],
        ["set-aside"],
    ):
        out, modules = await _imports_of(ws, *command, *where)
        assert {"jobs": "mam.cli.jobs", "logs": "mam.cli.logs", "set-aside": "mam.cli.set_aside"}.get(
            command[0], "mam.cli.show"
        ) in modules
        assert _network(modules) == [], command
        if command == ["show", "diet-2"]:  # the text form of a finished job, read whole
            assert "succeeded" in out and "done" in out and "  last line" in out and "mam logs diet-2" in out
            assert {"mam.cli.describe", "mam.cli.describe_reads"} <= modules and "mam.cli.show_routing" not in modules
        if command == ["show", "diet-3"]:
            assert "killed by SIGKILL (signal 9)" in out and "mam.cli.show_routing" not in modules
    # the same reading sees them where a command connects: `mam submit` publishes, and `mam show` of a queued
    # job asks for the runners (here of a broker that is not there: the view says so and goes on)
    out, modules = await _imports_of(ws, "submit", "--help")
    assert {"aiomqtt", "paho"} <= modules
    out, modules = await _imports_of(ws, "show", "diet-1", "--broker", "mqtt://127.0.0.1:9", *where)
    assert "mam.cli.show_routing" in modules and "aiomqtt" in modules
    assert "which runners are online is not known" in out


async def test_version_answers_before_the_parser_is_built(ws: WorkspacePaths) -> None:
    out, modules = await _imports_of(ws, "--version")
    assert out == "mam 0.1.0\n"
    assert not {"argparse", "mam.cli.top", "mam.cli.commands", "mam.process.args"} & modules
    out, modules = await _imports_of(ws, "-v", "--version")  # anything more goes through the parser
    assert out == "mam 0.1.0\n" and "mam.cli.top" in modules


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {name: action.help for name, action in command_lines(next(subparsers_of(parser))).items()}


@pytest.mark.fast
def test_the_lazy_table_names_every_command_with_the_help_its_module_registers() -> None:
    full = _help_lines(build_parser())
    table = {name: text for group in COMMAND_GROUPS for name, text in group.helps.items()}
    assert table == full
    assert list(_help_lines(build_parser(lazy=True))) == list(full)
    assert build_parser(lazy=True).format_help() == build_parser().format_help()


@pytest.mark.fast
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
