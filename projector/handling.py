"""The line between a refusal and a failure, for one message of a batch.

Decoding and checking a message (`ingest`, a runner's presence) never raises: whatever goes wrong
there, the message is refused with the reason. Folding a message that passed those checks may still
fail: that is a bug, not the message's fault, so it is not refused (which would acknowledge and lose
it) but raised as `HandlingFailed`, naming the message, for the shell to count, try again after a
backoff and, past its attempts, set aside (`set_aside.py`). The disk's troubles (`OSError`) and a tampered workspace are
the projector's own and pass through as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import aiomqtt
import anyio

from mam.contract.errors import MamError
from mam.contract.record import JobRecord
from mam.contract.status import AgentStatus, decode_agent_status
from mam.contract.topics import Topics
from mam.projector.faults import NO_FAULTS, TEST_HOOK, Faults, holding
from mam.projector.identity import verified_status
from mam.projector.ingest import Accepted, Refused, ingest
from mam.projector.set_aside import ATTEMPTS, BACKOFF, SetAside, digest
from mam.registry.nofollow import TamperedWorkspace

if TYPE_CHECKING:
    from mam.projector.audit_log import AuditLog
    from mam.projector.batch import Batch
    from mam.projector.index_writer import IndexWriter
    from mam.projector.projection import Message, Projection

log = logging.getLogger("mam.projector")

M = TypeVar("M", bound="Message")

PASSED_THROUGH: tuple[type[BaseException], ...] = (OSError, TamperedWorkspace)
"""What a failure to handle a message may raise as it is: storage, a link, a planted file."""


class HandlingFailed(Exception):
    """Folding `topic`'s message raised `cause`: the batch is folded again, from the state on disk."""

    def __init__(self, topic: str, payload: bytes, cause: Exception) -> None:
        super().__init__(f"handling a message on {topic} failed: {type(cause).__name__}: {cause}")
        self.topic = topic
        self.payload = payload
        self.cause = cause


def checked(topic: str, payload: bytes, topics: Topics, now: datetime, *, retained: bool) -> Accepted | Refused:
    """`ingest`, whatever the payload: an exception there is a refusal naming it."""
    try:
        return ingest(topic, payload, topics, now, retained=retained)
    except Exception as exc:  # noqa: BLE001 - any failure to decode or check one message refuses it
        return Refused(f"cannot read the event: {type(exc).__name__}: {exc}")


def presence(payload: bytes, open_jobs: Iterable[JobRecord]) -> AgentStatus | str | None:
    """A runner's status, verified (`identity.verified_status`); why it is ignored; or None (none, or cleared)."""
    try:
        status = decode_agent_status(payload)
        return None if status is None else verified_status(status, payload, open_jobs)
    except Exception as exc:  # noqa: BLE001 - a presence that cannot be checked is ignored, with the reason
        return f"a runner status that cannot be checked: {type(exc).__name__}: {exc}"


class Folding:
    """The projection's fold with failures contained: a message whose fold fails is counted durably,
    the state is read again from disk and, after a backoff (`BACKOFF`: 0.5 s, then 1 s), the batch folded
    again; once the message has failed `ATTEMPTS` times (restarts included) it is set aside and the batch
    folded without it, so it is acknowledged with the others and never redelivered to fail again. The batch
    waits meanwhile (its acknowledgements go out in order, once it is recorded): at most 1.5 s a message, once,
    since a message set aside already (tried again at a start or by `mam set-aside --replay`) has one try."""

    def __init__(
        self,
        projection: Projection,
        audit_log: AuditLog,
        index: IndexWriter,
        set_aside: SetAside,
        said: Callable[[], None],
        faults: Faults = NO_FAULTS,
    ) -> None:
        self.projection = projection
        self.log = audit_log
        self.index = index
        self.set_aside = set_aside
        self.said = said
        """Called once a message is set aside or leaves the set-aside file (the shell republishes its status)."""
        self.faults = faults
        """The faults the tests ask for (`faults.py`, read once at start); none in use."""
        self._drop_acks_on = faults.ack
        self._aside: set[int] = set()
        """The messages of the batch folded last that were set aside (by `id`)."""

    def parts(self, batch: list[M]) -> list[list[M]]:
        """The batch as it is; or, when some of its messages failed before, each of them alone first (so a
        failure while committing is theirs, not their batch's), then the rest."""
        if not self.set_aside.counts and not self.set_aside.entries:
            return [batch]
        counted, aside = self.set_aside.counts, self.set_aside.entries
        suspects = [m for m in batch if (key := digest(str(m.topic), payload_of(m))) in counted or key in aside]
        if not suspects:
            return [batch]
        alone = {id(m) for m in suspects}
        rest = [m for m in batch if id(m) not in alone]
        return [[m] for m in suspects] + ([rest] if rest else [])

    @contextmanager
    def attempt(self, batch: Sequence[Message]) -> Iterator[None]:
        """Around committing and publishing a batch: a failure there that is not the environment's (storage,
        the broker, a tampered workspace) is counted against each of its messages, and stops the projector
        in one line; at the next start each goes alone, and one that failed `ATTEMPTS` times is set aside."""
        batch = [m for m in batch if id(m) not in self._aside]  # those are settled: kept, to be acknowledged
        try:
            if holding(self.faults.commit, batch) is not None:
                raise RuntimeError(f"{TEST_HOOK}: a commit made to fail")
            yield
        except PASSED_THROUGH + (MamError, aiomqtt.MqttError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: counted, so a redelivered message cannot stop it forever
            log.error("committing a batch of %d message(s) failed", len(batch), exc_info=exc)
            most = self.set_aside.failed_all([(str(m.topic), payload_of(m)) for m in batch], exc)
            raise MamError(
                f"committing a batch of {len(batch)} message(s) failed ({type(exc).__name__}: {exc}; attempt "
                f"{most} of {ATTEMPTS}); stopping: restart the projector (a message that keeps "
                f"failing is set aside in {self.set_aside.path})"
            ) from None

    def before_acks(self, batch: Sequence[Message]) -> None:
        """Between a batch's commit and its acknowledgements: the test hook `ack:TEXT` drops the connection
        here, once (`faults.py`)."""
        if holding(self._drop_acks_on, batch) is not None:
            self._drop_acks_on = None
            raise aiomqtt.MqttError(f"{TEST_HOOK}: the connection lost between a commit and its acknowledgements")

    async def fold(self, batch: Sequence[Message], judge_at: datetime | None, fresh_since: datetime | None) -> Batch:
        aside = self._aside = set()
        for message in batch if self.set_aside.counts else ():  # failed often enough before (restarts too)
            if self.set_aside.exhausted(str(message.topic), payload_of(message)):
                await self._put_aside(str(message.topic), payload_of(message))
                aside.add(id(message))
        while True:
            prunes = list(self.projection.prunes)
            taken = [message for message in batch if id(message) not in aside] if aside else list(batch)
            try:
                self._made_to_fail(taken)
                return self.projection.fold(taken, judge_at=judge_at, fresh_since=fresh_since)
            except HandlingFailed as failed:
                self.projection.prunes = prunes
                wait = await self._failed(failed)
                if wait is None:
                    aside.update(id(m) for m in batch if _same(m, failed.topic, failed.payload))
                self.projection.reset()  # what the failed fold changed in memory is forgotten
                self.log.close()
                await anyio.sleep(wait or 0)  # a fault that clears meanwhile (the batch and its acks wait)
                await anyio.to_thread.run_sync(self.projection.load, not self.index.usable, self.index)

    def _made_to_fail(self, batch: Sequence[Message]) -> None:
        """The test hook `fold:TEXT` (`faults.py`): the fold fails on the first message holding TEXT, as a
        fold that raised on it would, before the projection folds anything."""
        failing = holding(self.faults.fold, batch)
        if failing is not None:
            try:  # raised, so that its log carries a traceback as a real failure's does
                raise RuntimeError(f"{TEST_HOOK}: a fold made to fail")
            except RuntimeError as cause:
                raise HandlingFailed(str(failing.topic), payload_of(failing), cause) from cause

    async def committed(self, batch: Sequence[Message]) -> None:
        """The batch is recorded: a message of it that had failed before is counted no more, and one that was
        set aside leaves the file (durably: a crash before then tries it again, a duplicate by its id)."""
        if not self.set_aside.counts and not self.set_aside.entries:
            return
        messages = [(str(m.topic), payload_of(m)) for m in batch if id(m) not in self._aside]  # not those set aside
        settled = await anyio.to_thread.run_sync(self.set_aside.succeeded, messages)
        for entry in settled:
            log.warning(
                "a message set aside on %s at %s is handled now; %d remain set aside",
                entry.topic,
                entry.set_aside_at,
                self.set_aside.set_aside,
            )
        if settled:
            self.said()

    async def _failed(self, failed: HandlingFailed) -> float | None:
        """Count a failure; the seconds to wait before the next try, or None once the message is set aside
        (durably, before it is acknowledged)."""
        topic, payload = failed.topic, failed.payload
        attempts, reason = await anyio.to_thread.run_sync(self.set_aside.failed, topic, payload, failed.cause)
        again = self.set_aside.is_aside(topic, payload)
        if attempts == 1 and not again:
            log.error("%s", failed, exc_info=failed.cause)
        if attempts < ATTEMPTS and not again:
            wait = BACKOFF[min(attempts, len(BACKOFF)) - 1]
            log.error(
                "handling a message on %s failed (attempt %d of %d): %s; folding its batch again from "
                "the state on disk in %gs",
                topic,
                attempts,
                ATTEMPTS,
                reason,
                wait,
            )
            return wait
        await self._put_aside(topic, payload)
        return None

    async def _put_aside(self, topic: str, payload: bytes) -> None:
        entry = await anyio.to_thread.run_sync(self.set_aside.put_aside, topic, payload)
        if entry.tried_again:
            log.error(
                "a message set aside on %s at %s failed again (a projector bug, not a refusal): %s; kept "
                "in %s (tried again %d time(s)), and acknowledged",
                topic,
                entry.set_aside_at,
                entry.reason,
                self.set_aside.path,
                entry.tried_again,
            )
        else:
            log.error(
                "set aside a message on %s after %d failed attempts (a projector bug, not a refusal): %s; "
                "kept in %s, and acknowledged",
                topic,
                entry.attempts,
                entry.reason,
                self.set_aside.path,
            )
        self.said()


def payload_of(message: Message) -> bytes:
    """A message's payload as bytes (an empty one for anything else)."""
    payload = message.payload
    return bytes(payload) if isinstance(payload, bytes | bytearray) else b""


def _same(message: Message, topic: str, payload: bytes) -> bool:
    return str(message.topic) == topic and payload_of(message) == payload


__all__ = ["PASSED_THROUGH", "Folding", "HandlingFailed", "checked", "payload_of", "presence"]
