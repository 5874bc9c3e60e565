"""Where a class's state is declared (tests/codebase/test_class_state.py), read from the source alone.

A class's state is what its methods read as `self.name`. It is declared when the class (or a base) says so at
class level (a dataclass field, a class attribute, a method or property), or when `__init__` sets
it, directly or through a method `__init__` calls. State first set anywhere else (pylint's
attribute-defined-outside-init), or only annotated on a plain class, is what a refactor forgets: nothing fails
until the one path that reads it runs, as an `AttributeError` deep in a process's stderr.

Bases are followed through the source (`from mam.x import Base`), never by importing the code. A class with a
base that is not mam's own (a library's, or a builtin exception) is not judged: what that base sets is not here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

NEUTRAL = frozenset({"object", "Generic", "Protocol", "ABC", "Enum", "StrEnum", "IntEnum"})
"""Bases that add no instance state a subclass reads."""


@dataclass(frozen=True)
class Undeclared:
    """`self.<attribute>` read in `method` of `cls` (file:line), declared nowhere the class's construction sees."""

    path: str
    line: int
    cls: str
    method: str
    attribute: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: {self.cls}.{self.method} reads self.{self.attribute}, "
            "which the class's construction does not set"
        )


@dataclass
class Tree:
    """The source of mam's modules, parsed once: `modules` maps an import name to its parsed file."""

    modules: dict[str, ast.Module] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, roots: Mapping[str, Path]) -> Tree:
        tree = cls()
        for folder in roots.values():
            for path in sorted(folder.rglob("*.py")):
                name = module_name(path, roots)
                tree.modules[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
                tree.paths[name] = path
        return tree

    def classes(self, module: str) -> dict[str, ast.ClassDef]:
        return {n.name: n for n in self.modules[module].body if isinstance(n, ast.ClassDef)}

    def resolve(self, module: str, base: ast.expr) -> tuple[str, ast.ClassDef] | str | None:
        """Where a base class named in `module` is defined: (module, class) for mam's own, its name for a
        neutral one (`NEUTRAL`), None for anything else (a library's class, a builtin exception)."""
        if isinstance(base, ast.Subscript):  # Generic[T], Protocol[T]
            base = base.value
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
        if name is None:
            return None
        if name in NEUTRAL:
            return name
        if isinstance(base, ast.Name):
            local = self.classes(module).get(name)
            if local is not None:
                return module, local
            for stmt in self.modules[module].body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.startswith("mam"):
                    for alias in stmt.names:
                        if (alias.asname or alias.name) == name and stmt.module in self.modules:
                            found = self.classes(stmt.module).get(alias.name)
                            return (stmt.module, found) if found is not None else None
        return None

    def lineage(self, module: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]] | None:
        """The class and every base of mam's own above it; None when a base is not mam's own (not judged)."""
        found = [(module, cls)]
        for base in cls.bases:
            where = self.resolve(module, base)
            if where is None:
                return None
            if isinstance(where, tuple):
                above = self.lineage(*where)
                if above is None:
                    return None
                found += above
        return found


def _self_attributes(node: ast.AST, *, stores: bool) -> Iterator[tuple[str, int]]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
            if isinstance(sub.ctx, ast.Store) == stores:
                yield sub.attr, sub.lineno


def _called_on_self(node: ast.AST) -> set[str]:
    return {
        call.func.attr
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
    }


def has_fields(cls: ast.ClassDef) -> bool:
    """Whether the class's annotations are fields its construction sets (a dataclass)."""
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def class_level(cls: ast.ClassDef, *, fields: bool) -> set[str]:
    """Names the class body declares. A bare annotation (`name: int`) declares state only where annotations are
    fields (`fields`); on a plain class it sets nothing, and neither does a name in `__slots__`."""
    names: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if fields or item.value is not None:
                names.add(item.target.id)
        elif isinstance(item, ast.Assign):  # not what `__slots__` names: a slot left unset fails when read
            names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
    return names


def methods_of(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}


def set_at_construction(cls: ast.ClassDef) -> set[str]:
    """What `__init__` (or a dataclass's `__post_init__`) sets, and what the methods it calls (and theirs) set."""
    methods = methods_of(cls)
    seen: set[str] = set()
    todo = ["__init__", "__post_init__"]
    names: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        names |= {attr for attr, _ in _self_attributes(methods[name], stores=True)}
        todo += sorted(_called_on_self(methods[name]))
    return names


def declared(lineage: list[tuple[str, ast.ClassDef]]) -> set[str]:
    names: set[str] = set()
    for _, cls in lineage:
        names |= class_level(cls, fields=has_fields(cls)) | set_at_construction(cls)
    return names


def undeclared(tree: Tree, module: str, path: str) -> list[Undeclared]:
    """Every `self.name` a method of a class in `module` reads that its construction does not declare."""
    found: list[Undeclared] = []
    for cls in (n for n in ast.walk(tree.modules[module]) if isinstance(n, ast.ClassDef)):
        lineage = tree.lineage(module, cls)
        if lineage is None:
            continue
        known = declared(lineage)
        for method in methods_of(cls).values():
            for attribute, line in _self_attributes(method, stores=False):
                if attribute not in known and not attribute.startswith("__"):
                    found.append(Undeclared(path, line, cls.name, method.name, attribute))
    return found


def module_name(path: Path, roots: Mapping[str, Path]) -> str:
    """`projector/service.py` -> `mam.projector.service`, by the package each top folder installs as."""
    for package, folder in roots.items():
        try:
            rel = path.relative_to(folder)
        except ValueError:
            continue
        parts = [*rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join([package, *parts])
    raise ValueError(f"{path} is in no package folder")
