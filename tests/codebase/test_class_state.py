"""Classes built from parts (issue 44, part 1; docs/contributing.md, Layout): a class's state is declared where
the class is, and a class is not split across files by inheritance.

A review found that deleting `self.drain_timeout = drain_timeout` from the Runner passed mypy and ruff: the
attribute was declared by a bare annotation on a base class in another file and read there, so only the drain
tests caught it, as a 41-second timeout. The rules held here:

- every `self.name` a method reads is set by the class's construction (its `__init__`, what `__init__` calls,
  a dataclass or msgspec field, a class attribute), or by a base's (`tests/class_state_support.py`);
- a class inherits from another module's class of mam only where inheritance is the point: an exception, an
  interface (ABC or Protocol), or an adapter over a library's class (its methods override the library's).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest
from class_state_support import Tree, has_fields, methods_of, module_name, set_at_construction, undeclared

from support import CHECKOUT

pytestmark = pytest.mark.fast

ROOTS = {
    "mam.broker": CHECKOUT / "broker",
    "mam.agents": CHECKOUT / "agents",
    "mam.projector": CHECKOUT / "projector",
    "mam.web": CHECKOUT / "web",
    "mam.mcp_server": CHECKOUT / "mcp_server",
    "mam": CHECKOUT / "mam",
}
"""Each folder and the package it installs as (setup.py's ROOTS)."""

MIXINS_OF_A_LIBRARY_CLASS = {
    "mam.broker.spool_delivery.SpoolHooks": "overrides amqtt Broker's delivery hooks and reads its state",
    "mam.broker.verdicts.DirectVerdicts": "overrides amqtt Broker's delivery and reads its sessions",
}
"""Classes whose state is a library's: each is a base of `broker/server.py`'s `_Broker` beside amqtt's Broker,
and overrides its methods (amqtt's only extension point for delivery), so what it reads the library sets."""

SPECIALISED = {
    "mam.web.hub.Page": "a dashboard page's inbox is an Inbox that also holds the page's filter",
    "mam.mcp_server.served.ChannelPublisher": "the MCP server's Publisher, sending over the server's own connection",
    "mam.broker.server._Broker": "amqtt's Broker with mam's hooks (the mixins above)",
}
"""Subclasses of a concrete mam class in another module, kept: each is the base class with one thing more."""

COMPOSED = (
    *("agents/runner.py", "agents/runner_claims.py", "agents/runner_link.py", "agents/runner_lifetime.py"),
    *("agents/supervisor.py", "agents/job_clocks.py", "agents/job_filters.py", "agents/job_release.py"),
    *("agents/job_worktree.py", "projector/service.py", "projector/storage.py", "projector/broker_link.py"),
    *("projector/committer.py", "projector/start_up.py", "projector/projection.py", "projector/job_states.py"),
    *("projector/tracking.py", "projector/admission.py", "projector/holding.py", "projector/answer_hold.py"),
    "projector/event_trust.py",
)
"""The modules of the Runner, Supervisor, Projector and Projection and their parts."""


TREE = Tree.of(ROOTS)


def _path(module: str) -> str:
    return str(TREE.paths[module].relative_to(CHECKOUT))


def test_every_attribute_a_method_reads_is_set_by_the_construction() -> None:
    found = [
        str(u)
        for module in TREE.modules
        for u in undeclared(TREE, module, _path(module))
        if f"{module}.{u.cls}" not in MIXINS_OF_A_LIBRARY_CLASS
    ]
    assert not found, "state read but not set at construction (set it in __init__ or declare a field):\n" + "\n".join(
        found
    )


def _is_interface(cls: ast.ClassDef) -> bool:
    bases = {ast.unparse(b).split("[")[0].split(".")[-1] for b in cls.bases}
    abstract = any("abstractmethod" in ast.unparse(d) for m in methods_of(cls).values() for d in m.decorator_list)
    return abstract or bool(bases & {"ABC", "Protocol"})


def _crossing() -> Iterator[tuple[str, ast.ClassDef, tuple[str, ast.ClassDef]]]:
    """(module, class, (base's module, base)) of each class whose base is mam's own class in another module."""
    for module, parsed in TREE.modules.items():
        for cls in (n for n in parsed.body if isinstance(n, ast.ClassDef)):
            for base in cls.bases:
                where = TREE.resolve(module, base)
                if isinstance(where, tuple) and where[0] != module:
                    yield module, cls, where


def test_a_class_inherits_from_another_module_only_where_inheritance_is_the_point() -> None:
    """Allowed: a base built on a library's class or a builtin (an exception, an adapter: `lineage` is None),
    an interface (ABC, Protocol, abstract methods), or a subclass listed in `SPECIALISED`."""
    split = [
        f"{module}.{cls.name} <- {where[0]}.{where[1].name}"
        for module, cls, where in _crossing()
        if TREE.lineage(*where) is not None
        and not _is_interface(where[1])
        and f"{module}.{cls.name}" not in SPECIALISED
    ]
    assert not split, "a class split across files by inheritance (make the base a member part):\n" + "\n".join(split)


def _read(tree: ast.ClassDef, but: ast.AST | None = None) -> set[str]:
    """What the class's methods (all but `but`) read as `self.name`."""
    return {
        n.attr
        for m in methods_of(tree).values()
        if m is not but
        for n in ast.walk(m)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    }


def _set_after(tree: ast.ClassDef, field: ast.AnnAssign) -> bool:
    return isinstance(field.target, ast.Name) and field.target.id in set_at_construction(tree)


def _state_lines(tree: ast.ClassDef) -> list[tuple[str, int]]:
    """(attribute, line) of each one-line declaration of state another method reads: a `self.x = ...` in
    `__init__`, or a dataclass's field."""
    init = methods_of(tree).get("__init__")
    found: dict[str, list[int]] = {}
    for stmt in init.body if init is not None else []:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.lineno == stmt.end_lineno:
            for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.setdefault(t.attr, []).append(stmt.lineno)
    if has_fields(tree):  # a field `__post_init__` sets is not judged here: slots=True refuses it at construction
        for stmt in (s for s in tree.body if not (isinstance(s, ast.AnnAssign) and _set_after(tree, s))):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.lineno == stmt.end_lineno:
                found.setdefault(stmt.target.id, []).append(stmt.lineno)
    read = _read(tree, but=init)
    return [(attr, lines[0]) for attr, lines in found.items() if attr in read and len(lines) == 1]


def test_deleting_any_declaration_of_state_in_the_composed_classes_is_caught() -> None:
    """The review's mutation, at every place it could be made: in each class of the Runner, Supervisor, Projector
    and Projection and their parts, each one-line `self.x = ...` of `__init__` and each dataclass field that
    another method reads is deleted in turn, and the check names the attribute. (A field left out where a part is
    made is a TypeError, and mypy's: tests/agents/test_runner_parts.py and the like.)"""
    mutated: dict[str, int] = {}
    for relative in COMPOSED:
        path = CHECKOUT / relative
        module = module_name(path, ROOTS)
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for cls in (n for n in TREE.modules[module].body if isinstance(n, ast.ClassDef)):
            if TREE.lineage(module, cls) is None:
                continue  # a library's class: not judged
            fixed = set(methods_of(cls)) | {
                t.id for a in cls.body if isinstance(a, ast.Assign) for t in a.targets if isinstance(t, ast.Name)
            }
            for attribute, line in _state_lines(cls):
                if attribute in fixed:
                    continue  # a property (with a setter) or a class attribute: declared without the line
                indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
                without = "".join([*lines[: line - 1], f"{indent}pass\n", *lines[line:]])
                mutant = Tree({**TREE.modules, module: ast.parse(without)}, TREE.paths)
                found = undeclared(mutant, module, _path(module))
                assert any(u.attribute == attribute and u.cls == cls.name for u in found), (
                    f"{_path(module)}:{line}: deleting {cls.name}'s {attribute} went unnoticed"
                )
                mutated[cls.name] = mutated.get(cls.name, 0) + 1
    for name in ("Runner", "Supervisor", "Projector", "Projection", "RunnerLink", "JobClocks"):
        assert mutated.get(name, 0) >= 3, f"{name}: {mutated.get(name, 0)} declarations deleted; was it moved?"
