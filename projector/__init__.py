"""The projector: the only writer of a workspace's registry and audit log."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.projector.service import Projector


def __getattr__(name: str) -> Any:
    """`from mam.projector import Projector` works as ever, importing `mam.projector.service` at that first
    use: importing any module of this package (`mam.projector.dirs`, say) loads only what that module imports."""
    if name == "Projector":
        from mam.projector.service import Projector

        return Projector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Projector"]
