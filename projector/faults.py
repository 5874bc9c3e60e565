"""The faults the tests make the projector have, since no input reaches a real bug (docs/contributing.md).

`MAM_TEST_FAIL` is read once, when the projector is built (`Faults.from_env`), and the parts that act on it
are handed a `Faults` (`handling.Folding`); the fold of each message (`projection.py`) knows nothing of it.
`fold:TEXT` makes the fold of a batch holding a message whose payload holds TEXT fail, naming that message
(as a fold that raised on it would), `commit:TEXT` the commit of a batch holding one, `ack:TEXT` drops the
connection once the first batch holding one is committed, before its acknowledgements go out (the window a
failover hits: the broker redelivers what is on disk already).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

TEST_HOOK: Final = "MAM_TEST_FAIL"


class _Message(Protocol):
    @property
    def payload(self) -> object: ...


M = TypeVar("M", bound=_Message)


@dataclass(frozen=True)
class Faults:
    """Which fault to make, and the text a message's payload holds to get it; none by default."""

    fold: bytes | None = None
    commit: bytes | None = None
    ack: bytes | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Faults:
        """The faults `MAM_TEST_FAIL` asks for (`fold:TEXT`, `commit:TEXT` or `ack:TEXT`), or none."""
        where, _, marker = env.get(TEST_HOOK, "").partition(":")
        if not marker or where not in ("fold", "commit", "ack"):
            return cls()
        return cls(**{where: marker.encode()})


def holding(marker: bytes | None, batch: Iterable[M]) -> M | None:
    """The first message of `batch` whose payload holds `marker`; None without a marker."""
    if marker is None:
        return None
    return next((m for m in batch if isinstance(m.payload, bytes | bytearray) and marker in m.payload), None)


NO_FAULTS: Final = Faults()

__all__ = ["NO_FAULTS", "TEST_HOOK", "Faults", "holding"]
