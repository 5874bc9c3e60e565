"""What the projector publishes for readers: each job's retained state (signed), refusals, and
at start the states a restarted embedded broker forgot.

A refused event of a job the projector holds is answered with that job's state again: whoever
sent it may have acted on a stale retained state (a broker that restarted from an old snapshot of
its retained messages), and the refusal is the one moment the projector learns of it (see
docs/design/projector.md, "Signed states": why it does not compare every retained state).

Under `mam up` they go straight into the broker in the same process (`publish_local`); else they
are queued on the projector's client, on the wire before the PUBACKs queued after them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

import aiomqtt
import anyio
import paho.mqtt.client as paho

from mam.client.aiomqtt_internals import publish_nowait
from mam.contract.record import JobRecord
from mam.contract.status import encode
from mam.contract.topics import Topics
from mam.projector.batch import Batch
from mam.projector.replay import JobState
from mam.projector.retention import pruned_ids
from mam.projector.signer import StateSigner
from mam.registry.pruning import is_pruned

log = logging.getLogger("mam.projector")

LocalPublish = Callable[[str, bytes, bool], Awaitable[None]]
"""Publish (topic, payload, retain) into a broker in this process, as `mam up` has one."""
RESTORE_CONCURRENCY = 64


class Views:
    """The projector's publishing of states and refusals, over its client or into its own broker."""

    def __init__(
        self,
        topics: Topics,
        signer: StateSigner,
        publish_local: LocalPublish | None,
        known: Mapping[str, JobState] | None = None,
    ) -> None:
        """`known`: the projection's cached job states (committed when a batch is published): a refused
        event's job found there has its state republished."""
        self.topics = topics
        self.signer = signer
        self.publish_local = publish_local
        self.known: Mapping[str, JobState] = known if known is not None else {}
        self.corrected = 0
        """States republished after a refusal (`republish_refused`)."""

    async def publish_batch(self, client: aiomqtt.Client, staged: Batch) -> None:
        """A committed batch's states (a verdict first where one was derived from), the retained states
        of the jobs it pruned cleared, and its refusals."""
        for job_id, record in staged.verdicts.items():
            await self.publish(client, self.topics.state(job_id), self.signer.payload(record), retain=True)
        for job_id, record in staged.records.items():
            await self.publish(client, self.topics.state(job_id), self.signer.payload(record), retain=True)
        for job_id in pruned_ids(staged.records):  # after its last state, cleared: a fresh subscriber gets nothing
            await self.publish(client, self.topics.state(job_id), b"", retain=True)
        for i, rejection in enumerate(staged.rejections):
            await self.publish(client, self.topics.rejected, self.signer.signed(encode(rejection)), retain=False)
            if i not in staged.unlogged:  # past the rate: summed up once the window ends (`refusal_log.py`)
                log.info("refused event on %s: %s", rejection.topic, rejection.reason)
        await self.republish_refused(client, staged)

    async def republish_refused(self, client: aiomqtt.Client, staged: Batch) -> None:
        """The state of each job an event was refused for, or a duplicate came for (a resend: the state
        shows its sender the event recorded), once per batch, unless the batch published it.

        Cheap at any registry size: no retained state is read, only the refused jobs' cached records
        are looked up (the fold has just read them), and a refusal is rare. Any refusal counts, not
        only `expected_version`: a cancel of a job a stale state shows running is refused too."""
        done: set[str] = set(staged.records)
        for job_id in [rejection.job_id for rejection in staged.rejections] + sorted(staged.echoed):
            if job_id is None or job_id in done:
                continue
            done.add(job_id)
            state = self.known.get(job_id)
            record = state.record if state is not None else None
            if record is None:
                continue  # unknown, or an event the fold never read: no state of it is the registry's
            payload = b"" if is_pruned(record) else self.signer.payload(record)
            await self.publish(client, self.topics.state(job_id), payload, retain=True)
            self.corrected += 1
            log.debug("job %s: state v%d republished after a refusal", job_id, record.version)

    async def publish(self, client: aiomqtt.Client, topic: str, payload: bytes, *, retain: bool) -> None:
        """A state or refusal: straight into the broker in this process if there is one,
        else queued on the client (on the wire before the PUBACKs queued after it)."""
        if self.publish_local is not None:
            await self.publish_local(topic, payload, retain)
        else:
            publish_nowait(client, topic, payload, retain=retain)

    async def republish(self, client: aiomqtt.Client, record: JobRecord) -> paho.MQTTMessageInfo | None:
        """One state signed again (`resign.py`): the handle to its PUBACK, or None once it is in the broker."""
        topic, payload = self.topics.state(record.job_id), self.signer.payload(record)
        if self.publish_local is not None:
            await self.publish_local(topic, payload, True)
            return None
        return publish_nowait(client, topic, payload, retain=True)

    async def restore(self, client: aiomqtt.Client, records: Iterable[JobRecord]) -> None:
        """Publish records as retained state (the embedded broker forgot them when it stopped)."""
        listed = await anyio.to_thread.run_sync(list, records)
        limiter = anyio.CapacityLimiter(RESTORE_CONCURRENCY)

        async def one(record: JobRecord) -> None:
            async with limiter:
                await client.publish(self.topics.state(record.job_id), self.signer.payload(record), qos=1, retain=True)

        if self.publish_local is not None:
            for record in listed:
                await self.publish_local(self.topics.state(record.job_id), self.signer.payload(record), True)
        else:
            async with anyio.create_task_group() as tg:
                for record in listed:
                    tg.start_soon(one, record)
        (log.info if listed else log.debug)("restored the retained state of %d job(s)", len(listed))  # none: quiet

    async def refresh(self, client: aiomqtt.Client, records: Iterable[JobRecord]) -> None:
        """Publish again, queued in order ahead of anything the serve loop publishes, the retained
        states a broker may hold stale after it restarted (the bounded set of `index_startup`)."""
        listed = await anyio.to_thread.run_sync(list, records)
        for record in listed:
            state = self.signer.payload(record)
            if self.publish_local is not None:
                await self.publish_local(self.topics.state(record.job_id), state, True)
            else:
                publish_nowait(client, self.topics.state(record.job_id), state, retain=True)
        if listed:
            log.info("republished the retained state of %d job(s)", len(listed))
