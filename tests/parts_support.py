"""Checks the tests of classes built from parts share (tests/agents/test_runner_parts.py, test_supervisor_parts.py,
tests/projector/test_projector_parts.py, test_projection_parts.py): a part made without a piece of its state is
refused naming it, state not declared cannot be set, and every declared slot has a value once made."""

from __future__ import annotations

import dataclasses

import pytest


def required_fields(part: type) -> list[str]:
    """The dataclass fields a caller must give: no default and no default factory."""
    return [
        f.name
        for f in dataclasses.fields(part)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def assert_each_required_field_is_named_when_left_out(part: type) -> None:
    """Made with every required field but one (as a caller that forgot it would: mypy refuses such a call), the
    part raises TypeError naming the one left out."""
    required = required_fields(part)
    assert required, part
    for name in required:
        given = {other: object() for other in required if other != name}
        with pytest.raises(TypeError, match=rf"missing 1 required .*argument: '{name}'"):
            part(**given)


def assert_refuses_undeclared(owner: object, name: str = "undeclared") -> None:
    """`owner` has no `__dict__`: setting state it does not declare (what a refactor that forgets a declaration
    does) raises AttributeError."""
    assert not hasattr(owner, "__dict__"), type(owner)
    with pytest.raises(AttributeError):
        setattr(owner, name, 1)


def unset_slots(owner: object) -> list[str]:
    """The slots (of its class and its bases) that `owner` has no value for: each would raise when read."""
    slots = [name for klass in type(owner).__mro__ for name in getattr(klass, "__slots__", ())]
    assert slots, type(owner)
    return [name for name in slots if not hasattr(owner, name)]
