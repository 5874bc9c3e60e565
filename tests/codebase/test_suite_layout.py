"""The suite stays tidy (docs/contributing.md): test files in component folders under unique names,
fixtures in conftest, shared helpers in `*_support` (or other non-`test_`) modules, no test module importing
another, and every `test_*.py` file a module of tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import TESTS

pytestmark = pytest.mark.fast


def _suite_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{line} imports {module}"
        for path in _suite_files()
        for line, module in _imported_modules(ast.parse(path.read_text(), str(path)))
        if module.split(".")[-1].startswith("test_")
    ]
    assert not offenders, "move what they share into a *_support module (fixtures into conftest.py):\n" + "\n".join(
        offenders
    )


def test_every_test_named_module_holds_tests() -> None:
    def has_tests(tree: ast.Module) -> bool:
        return any(
            (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"))
            or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))
            for node in tree.body
        )

    helpers = [
        str(path.relative_to(TESTS))
        for path in _suite_files()
        if path.name.startswith("test_") and not has_tests(ast.parse(path.read_text(), str(path)))
    ]
    assert not helpers, f"helper modules named like test files (name them *_support.py): {helpers}"


def test_test_files_sit_in_component_folders_under_unique_names() -> None:
    """Folders without `__init__.py` import a test file by its basename: two of one name would clash."""
    tests = [path for path in _suite_files() if path.name.startswith("test_")]
    loose = [path.name for path in tests if path.parent == TESTS]
    assert not loose, f"move these into the folder of their component (docs/contributing.md): {loose}"
    seen: dict[str, Path] = {}
    clashes = [
        f"{path.relative_to(TESTS)} and {seen[path.name].relative_to(TESTS)}"
        for path in tests
        if seen.setdefault(path.name, path) != path
    ]
    assert not clashes, f"test files of the same name: {clashes}"
    packages = sorted({str(p.parent.relative_to(TESTS)) for p in tests if (p.parent / "__init__.py").exists()})
    assert not packages, f"the suite's folders are not packages (imported by basename): {packages}"
