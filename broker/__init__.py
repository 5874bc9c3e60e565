"""The embedded broker: amqtt, configured for mam."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.broker.server import EmbeddedBroker


def __getattr__(name: str) -> Any:
    """`from mam.broker import EmbeddedBroker` works as ever, importing `mam.broker.server` at that first
    use: importing any module of this package (`mam.broker.dirs`, say) loads only what that module imports."""
    if name == "EmbeddedBroker":
        from mam.broker.server import EmbeddedBroker

        return EmbeddedBroker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EmbeddedBroker"]
