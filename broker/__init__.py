"""The embedded broker: amqtt, configured for mam."""

from mam.broker.server import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
