"""mam: an MQTT-native, event-sourced job registry for multi-agent coding work."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher
    from mam.contract.errors import MamError
    from mam.contract.events import AnyEvent, decode_event
    from mam.contract.record import JobRecord, Status
    from mam.contract.topics import Topics
    from mam.contract.workspace import Workspace, logs_dir, registry_dir, resolve

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AnyEvent": "mam.contract.events",
    "JobRecord": "mam.contract.record",
    "MamError": "mam.contract.errors",
    "Publisher": "mam.agents.publisher",
    "Status": "mam.contract.record",
    "Topics": "mam.contract.topics",
    "Workspace": "mam.contract.workspace",
    "decode_event": "mam.contract.events",
    "logs_dir": "mam.contract.workspace",
    "registry_dir": "mam.contract.workspace",
    "resolve": "mam.contract.workspace",
}
"""`from mam import JobRecord` works as ever; the module behind a name is imported at its first use,
so that `import mam` (every `mam` command, `mam --version` too) does not load msgspec and the schema.
`Publisher` (the writers' API, `mam.agents.publisher`) loads aiomqtt only when a program names it."""


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A package's `__getattr__` (PEP 562) for `exports` (name -> the module that defines it): each module
    is imported at its name's first use, so importing any module of the package loads only what that
    module imports. mam's packages (`mam`, `mam.broker`, `mam.projector`, `mam.agents`) use it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value
        return value

    return __getattr__


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "AnyEvent",
    "JobRecord",
    "MamError",
    "Publisher",
    "Status",
    "Topics",
    "Workspace",
    "__version__",
    "decode_event",
    "lazy_exports",
    "logs_dir",
    "registry_dir",
    "resolve",
]
