"""Checking that a library still has the private parts mam's adapters reach into.

Each library mam patches or subclasses beyond its documented API has one adapter module
(`mam.client.aiomqtt_internals`, `mam.broker.amqtt_internals`, `mam.web.uvicorn_internals`,
`mam.process.argparse_internals`;
docs/contributing.md, Dependencies). Each adapter lists what it touches and its `check()`
compares that with the installed release using these helpers: a method by its parameter
names, an attribute by its type. What differs is named in one `LibraryChanged` line, at
start-up, instead of a patch that no longer takes or a method override amqtt never calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from mam.contract.errors import LibraryChanged

Methods = Mapping[str, tuple[str, ...]]
"""Method name -> its parameter names after `self`, in order."""
Attributes = Mapping[str, type | tuple[type, ...]]
"""Attribute name -> the type(s) its value must have."""


def method_problems(owner: type, expected: Methods) -> list[str]:
    """What `owner` lacks of `expected`: a missing method, or one whose parameters changed."""
    problems = []
    for name, params in expected.items():
        method = inspect.getattr_static(owner, name, None)
        if method is None or not callable(getattr(owner, name, None)):
            problems.append(f"{owner.__name__}.{name}")
            continue
        try:
            signature = inspect.signature(getattr(owner, name))
        except (TypeError, ValueError):
            problems.append(f"{owner.__name__}.{name} (no signature)")
            continue
        found = tuple(p for p in signature.parameters if p != "self")
        if found != params:
            problems.append(f"{owner.__name__}.{name}({', '.join(params)}) (now ({', '.join(found)}))")
    return problems


def attribute_problems(obj: Any, expected: Attributes) -> list[str]:
    """What `obj` lacks of `expected`: a missing attribute, or one of another type."""
    problems = []
    for name, kind in expected.items():
        if not hasattr(obj, name):
            problems.append(f"{type(obj).__name__}.{name}")
        elif not isinstance(getattr(obj, name), kind):
            problems.append(f"{type(obj).__name__}.{name} as {_named(kind)} (now {type(getattr(obj, name)).__name__})")
    return problems


def require(distribution: str, problems: list[str]) -> None:
    """Raise `LibraryChanged` naming `distribution`'s release and everything in `problems`."""
    if problems:
        raise LibraryChanged.of(distribution, f"lacks {', '.join(problems)}")


def _named(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
