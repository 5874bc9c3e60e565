"""The fence around third-party internals (docs/contributing.md, Dependencies): only the three adapters
override a private method of amqtt, aiomqtt, paho-mqtt or uvicorn; each adapter's `check` passes on the
pinned releases and names the release and the attribute when one lacks what it touches; and the patches
a running broker depends on are in place. (aiomqtt and paho: tests/client/test_aiomqtt_internals.py.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest
from amqtt.broker import Broker
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from uvicorn.protocols.http.h11_impl import H11Protocol

from mam.broker import amqtt_internals
from mam.broker.handler import ClientHandler
from mam.broker.server import EmbeddedBroker
from mam.broker.subscriptions import SubscriptionTable
from mam.client.mqtt import make_client
from mam.contract.errors import LibraryChanged
from mam.web import uvicorn_internals

from support import CHECKOUT

ADAPTERS = {"mam.broker.amqtt_internals", "mam.client.aiomqtt_internals", "mam.web.uvicorn_internals"}
LIBRARIES = ("amqtt", "aiomqtt", "paho", "uvicorn")
ROOT = CHECKOUT
SOURCES = {
    "mam": "mam",
    "mam.broker": "broker",
    "mam.agents": "agents",
    "mam.projector": "projector",
    "mam.web": "web",
    "mam.mcp_server": "mcp_server",
}
"""Each package that holds mam's code, and its folder in the checkout."""


def _modules() -> list[str]:
    names = []
    for package in SOURCES:
        names.append(package)
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            if not info.name.startswith(tuple(f"{p}." for p in SOURCES if p != package and p.startswith(package))):
                names.append(info.name)
    return sorted(set(names))


def _library_privates_overridden(cls: type) -> list[str]:
    """The names `cls` defines that are private methods or attributes of a base from one of `LIBRARIES`."""
    found = []
    for name in vars(cls):
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")) or name == "_abc_impl":
            continue  # public, a dunder, or what ABCMeta sets on every class
        for base in cls.__mro__[1:]:
            if base.__module__.split(".")[0] in LIBRARIES and name in vars(base):
                found.append(f"{cls.__module__}.{cls.__qualname__}.{name} (over {base.__module__}.{base.__name__})")
                break
    return found


@pytest.mark.fast
def test_only_the_adapters_override_a_librarys_private_methods() -> None:
    overrides = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and name not in ADAPTERS:
                overrides += _library_privates_overridden(cls)
    assert overrides == []


@pytest.mark.fast
def test_the_scan_sees_an_override() -> None:
    class Sneaky(BrokerProtocolHandler):
        async def _handle_message_flow(self, app_message: object) -> None:  # type: ignore[override]
            return None

    (found,) = _library_privates_overridden(Sneaky)
    assert "Sneaky._handle_message_flow (over amqtt.mqtt.protocol." in found


@pytest.mark.fast
def test_only_the_adapters_switch_an_objects_class() -> None:
    """`obj.__class__ = ...` on a library's object is an override in disguise (`amqtt_internals.become`)."""
    allowed = {"broker/amqtt_internals.py"}
    switching = []
    for folder in SOURCES.values():
        for source in sorted((ROOT / folder).rglob("*.py")):
            shown = str(source.relative_to(ROOT))
            for node in ast.walk(ast.parse(source.read_text())):
                if (
                    isinstance(node, ast.Assign)
                    and shown not in allowed
                    and any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in node.targets)
                ):
                    switching.append(f"{shown}:{node.lineno}")
    assert switching == []


@pytest.mark.fast
def test_the_pinned_amqtt_passes_its_check() -> None:
    amqtt_internals.check()


class _BrokerWithoutReplay(Broker):
    """amqtt as a release that renamed the retained replay would be."""

    _publish_retained_messages_for_subscription = None  # type: ignore[assignment]


class _HandlerWithOtherFlow(BrokerProtocolHandler):
    """amqtt as a release whose QoS 1 flow takes other parameters would be."""

    async def _handle_qos1_message_flow(self, app_message: object, retry: bool) -> None:  # type: ignore[override]
        return None


@pytest.mark.fast
@pytest.mark.parametrize(
    ("classes", "named"),
    [
        ({"broker_class": _BrokerWithoutReplay}, r"amqtt 0\.\d+\.\d+ lacks _BrokerWithoutReplay\._publish_retained"),
        (
            {"handler_class": _HandlerWithOtherFlow},
            r"lacks _HandlerWithOtherFlow\._handle_qos1_message_flow\(app_message\) "
            r"\(now \(app_message, retry\)\)",
        ),
    ],
)
def test_an_amqtt_without_a_touched_name_is_refused_by_name(classes: dict[str, type], named: str) -> None:
    with pytest.raises(LibraryChanged, match=named + r".*constraints\.txt"):
        amqtt_internals.check(**classes)


async def test_a_running_broker_carries_its_patches() -> None:
    """The subscription table is mam's, and a connected client's handler was switched to `ClientHandler`."""
    async with EmbeddedBroker(port=0) as broker, make_client(broker.address, identifier="fence-probe") as client:
        await client.subscribe("fence/probe", qos=1)
        running = broker.running
        assert running is not None
        assert type(running.subscriptions) is SubscriptionTable
        amqtt_internals.check_broker(running)
        _, handler = running.sessions["fence-probe"]
        assert isinstance(handler, ClientHandler)


@pytest.mark.fast
def test_become_refuses_a_handler_amqtt_did_not_build_as_expected() -> None:
    class Other(BrokerProtocolHandler):
        pass

    handler = Other.__new__(Other)
    with pytest.raises(TypeError, match="amqtt built a Other, not the BrokerProtocolHandler"):
        amqtt_internals.become(handler, ClientHandler)


async def test_the_pinned_uvicorn_passes_its_check() -> None:
    uvicorn_internals.check()


class _ProtocolWithOtherData(H11Protocol):
    """uvicorn as a release whose `data_received` takes other parameters would be."""

    def data_received(self, data: bytes, more: bool) -> None:  # type: ignore[override]
        return None


async def test_a_uvicorn_without_a_touched_name_is_refused_by_name() -> None:
    with pytest.raises(
        LibraryChanged,
        match=r"uvicorn 0\.\d+\.\d+ lacks _ProtocolWithOtherData\.data_received\(data\) "
        r"\(now \(data, more\)\).*constraints\.txt",
    ):
        uvicorn_internals.check(protocol_class=_ProtocolWithOtherData)
