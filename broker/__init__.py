"""The embedded broker: amqtt, configured for mam."""

from typing import TYPE_CHECKING

from mam import lazy_exports

if TYPE_CHECKING:
    from mam.broker.server import EmbeddedBroker


__getattr__ = lazy_exports(__name__, {"EmbeddedBroker": "mam.broker.server"})
"""`from mam.broker import EmbeddedBroker` imports `mam.broker.server` then; importing another module of
this package (`mam.broker.topic_match`, say) loads only what that module imports."""


__all__ = ["EmbeddedBroker"]
