"""Several brokers for one workspace: `mqtt://a:1883,mqtt://b:1883`, tried in order.

Every place that takes a broker URL (`--broker`, repeated or comma-separated;
`MAM_BROKER_URL`; the runtime file) takes a list. One URL is a list of one and
behaves exactly as before, a password with a comma in it included: a value that
parses as one URL whose host has no comma is that one URL; anything else is split
at its commas.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from mam.contract.broker_url import BrokerAddress, parse_broker_url
from mam.contract.errors import UsageError


@dataclass(frozen=True, slots=True)
class BrokerList:
    """The brokers of one cluster (or one broker), in the order a client tries them."""

    addresses: tuple[BrokerAddress, ...]

    def __post_init__(self) -> None:
        if not self.addresses:
            raise ValueError("a BrokerList needs at least one address")

    def __iter__(self) -> Iterator[BrokerAddress]:
        return iter(self.addresses)

    def __len__(self) -> int:
        return len(self.addresses)

    @property
    def first(self) -> BrokerAddress:
        return self.addresses[0]

    @property
    def url(self) -> str:
        """The URLs, comma-separated, without passwords: safe to print and log."""
        return ",".join(address.url for address in self.addresses)

    @property
    def full_url(self) -> str:
        """The URLs with credentials, for handing to a child process."""
        return ",".join(address.full_url for address in self.addresses)


Brokers = BrokerAddress | BrokerList
"""What a client connects to: one address, or several to fail over between."""


def addresses_of(brokers: Brokers) -> tuple[BrokerAddress, ...]:
    return (brokers,) if isinstance(brokers, BrokerAddress) else brokers.addresses


def parse_broker_urls(text: str | Iterable[str]) -> BrokerList:
    """Parse one URL, a comma-separated list, or several of either (a repeated flag).

    A malformed entry raises `UsageError` naming that entry (see `parse_broker_url`);
    an empty one (`a,,b`, a trailing comma) names the whole value typed."""
    values = [text] if isinstance(text, str) else list(text)
    addresses: list[BrokerAddress] = []
    for value in values:
        if (single := _one_url(value)) is not None:
            addresses.append(single)
            continue
        entries = [entry.strip() for entry in value.split(",")]
        if not all(entries):
            raise UsageError(
                f"invalid broker URL list {value!r}: an empty entry; separate URLs with single commas "
                "(mqtt://a:1883,mqtt://b:1883)"
            )
        addresses.extend(parse_broker_url(entry) for entry in entries)
    if not addresses:
        raise UsageError("no broker URL given; expected mqtt://[user:pass@]host:port[,mqtt://...]")
    return BrokerList(_unique(addresses))


def parse_brokers(text: str | Iterable[str]) -> Brokers:
    """`parse_broker_urls`, with one URL kept a plain `BrokerAddress`, as clients had it before lists."""
    brokers = parse_broker_urls(text)
    return brokers.first if len(brokers) == 1 else brokers


def _one_url(value: str) -> BrokerAddress | None:
    """`value` as a single URL, if it is one (a comma may sit in its user info, never in its host)."""
    if "," not in value:
        return parse_broker_url(value)
    try:
        address = parse_broker_url(value)
    except UsageError:
        return None
    return None if "," in address.host else address


def _unique(addresses: Sequence[BrokerAddress]) -> tuple[BrokerAddress, ...]:
    """The same broker named twice is tried once, where it came first."""
    seen: dict[BrokerAddress, None] = {}
    for address in addresses:
        seen.setdefault(address, None)
    return tuple(seen)


def same_broker(a: BrokerAddress, b: BrokerAddress) -> bool:
    """Whether two addresses name the same listener (any loopback name is the same host)."""
    loopback = {"127.0.0.1", "localhost", "::1"}
    hosts_match = a.host == b.host or (a.host in loopback and b.host in loopback)
    return hosts_match and a.port == b.port and a.tls == b.tls


def overlap(a: Brokers, b: Brokers) -> bool:
    """Whether two lists share a broker: a client of one reaches the cluster the other serves."""
    return any(same_broker(x, y) for x in addresses_of(a) for y in addresses_of(b))
