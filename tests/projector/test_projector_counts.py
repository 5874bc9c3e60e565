"""The projector's closing line is true across a failover.

`stopped: N events accepted, N refused, N duplicates, N parked, in N batches` counts a batch once it is
committed. Before, it counted a batch only once its acknowledgements were sent: a connection lost between
the commit and the acks (a failover) left that batch uncounted while its events were on disk, and the
broker's redelivery of it counted as duplicates (972 of 1,000 reported, all 1,000 recorded). The window is
made deterministic with the documented test hook `MAM_TEST_FAIL=ack:TEXT` (`projector/faults.py`): the
connection really drops there and mosquitto really redelivers what was not acknowledged.
"""

from __future__ import annotations

import json
import re

import pytest

from brokers import RunningBroker
from e2e import workspace_id
from support import BIN, Daemon, Watch, _client, child_env, wait_projector_online
from workspace_support import WorkspacePaths

MARK = "ACK-DROP-41c"
EVENTS = 200


def _submitted(n: int) -> bytes:
    prompt = f"job {n}" + (f" {MARK}" if n == EVENTS // 2 else "")
    return json.dumps({"type": "submitted", "prompt": prompt, "agent": "a", "id": f"ev-{n:04d}"}).encode()


def _closing_counts(output: str) -> dict[str, int]:
    found = re.search(
        r"stopped: (\d+) events accepted, (\d+) refused, (\d+) duplicates, (\d+) parked, in (\d+) "
        r"batches",
        output,
    )
    assert found is not None, output
    return dict(zip(("accepted", "refused", "duplicates", "parked", "batches"), map(int, found.groups()), strict=True))


@pytest.mark.timeout(90)
async def test_a_batch_committed_before_a_lost_connection_is_counted_accepted_once_and_its_redelivery_duplicate(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    projector = Daemon(
        [str(BIN / "mam-projector"), "--broker", mosquitto.url, "--workspace", str(ws.root)],
        cwd=ws.elsewhere,
        env=child_env(MAM_TEST_FAIL=f"ack:{MARK}"),
        log=ws.root.parent / "projector.log",
    )
    try:
        await wait_projector_online(mosquitto.url, ws_id, pid=projector.pid)
        async with Watch(mosquitto.url, f"mam/{ws_id}/jobs/+/state") as states:
            async with _client(mosquitto.url) as client:
                for n in range(EVENTS):
                    await client.publish(f"mam/{ws_id}/jobs/count-{n:04d}/events", _submitted(n), qos=1)
            seen: set[str] = set()
            while len(seen) < EVENTS:  # the dropped batch's states come once it has reconnected
                topic, payload = await states.next(lambda _t, p: bool(p), timeout=30)
                seen.add(topic.split("/")[3])
            # The redelivery was on the wire before this (mosquitto resends at the session's resumption):
            # once this one is recorded, every copy of the dropped batch was judged.
            async with _client(mosquitto.url) as client:
                await client.publish(f"mam/{ws_id}/jobs/sentinel/events", _submitted(EVENTS), qos=1)
            await states.next(lambda t, p: "/sentinel/" in t and bool(p), timeout=30)
    finally:
        projector.stop()
    output = projector.output()
    assert "MAM_TEST_FAIL: the connection lost between a commit and its acknowledgements" in output, output
    counts = _closing_counts(output)
    recorded = len(list(ws.jobs.glob("*.json")))
    assert recorded == EVENTS + 1
    assert counts["accepted"] == recorded, counts
    assert counts["duplicates"] >= 1, "the committed batch, redelivered, is a duplicate"
    assert counts["refused"] == 0 and counts["parked"] == 0, counts
