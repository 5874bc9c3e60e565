"""A claimed job whose `started` is lost or late is not judged lost, and ends as its runner said.

The soak on NATS found it (issue 29): nats-server 2.9.10 acknowledged a runner's `started` as it
stopped and never stored it; the job's numbered outputs and outcome, which follow a `started`, were
held for it, its lease ran out once the runner had finished, and the job was recorded `lost` (its
runner saw exit 0) with its outputs and outcome refused. Now the held events are signs of life, and
after `--settle-outputs` the projector infers the start they prove and applies them; a `started`
that comes after all is logged, and a heartbeat delivered after its job's outcome is dropped.
Events here are signed by a runner key named in the claim, as mam-agent signs them.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from msgspec import UNSET
from order_spool_support import refusals
from order_support import Harness

from mam.contract import events as ev
from mam.contract.identity import RunnerKey
from mam.contract.timefmt import utc_now
from mam.projector.liveness import Limits, on_clock, parse_time
from mam.projector.parking import ParkLimits
from mam.projector.repair import DirtyList

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import _client, mam, run, wait_for_state
from workspace_support import WorkspacePaths


class Runner:
    """A runner's events for one job, signed with the key its claim names."""

    def __init__(self, job_id: str, name: str = "r1") -> None:
        self.job_id, self.name, self.key = job_id, name, RunnerKey()

    def submitted(self) -> bytes:
        return ev.encode_event(ev.Submitted(id=f"{self.job_id}-s", prompt="p", agent="a"))

    def claimed(self) -> bytes:
        return self._signed(ev.Claimed(id=f"{self.job_id}-c", runner=self.name, epoch="e1", runner_key=self.key.public))

    def started(self) -> bytes:
        return self._signed(ev.Started(id=f"{self.job_id}-st", runner=self.name, pid=42, counts_outputs=True))

    def output(self, seq: int) -> bytes:
        return self._signed(ev.Output(id=f"{self.job_id}-o{seq}", text=f"line {seq}\n", seq=seq))

    def heartbeat(self, n: int) -> bytes:
        return self._signed(ev.Heartbeat(id=f"{self.job_id}-hb{n}", runner=self.name, seq=n + 1))

    def succeeded(self, outputs: int) -> bytes:
        return self._signed(ev.Succeeded(id=f"{self.job_id}-z", exit_code=0, outputs=outputs))

    def _signed(self, event: ev.AnyEvent) -> bytes:
        return self.key.sign_event(self.job_id, ev.encode_event(event))


def judge(h: Harness, after: float):  # noqa: ANN201 - a Batch
    """What the projector decides `after` seconds from now on a current view, committed."""
    staged = h.projection.fold([], judge_at=utc_now() + timedelta(seconds=after))
    staged.commit(
        h.log, h.registry, DirtyList(h.workspace.registry_dir), durable=False, parked_dir=str(h.projection.parking.dir)
    )
    return staged


@pytest.mark.fast
def test_outputs_waiting_for_their_started_are_signs_of_life(tmp_path: Path) -> None:
    h, r = Harness(tmp_path, ParkLimits(settle=60)), Runner("j")
    h.fold(("j", r.submitted()), ("j", r.claimed()))
    held = h.fold(("j", r.output(0)))
    assert held.held == 1 and held.rejections == []
    heard = h.projection.holding.heard({})["j"]  # the projection's signs of life, read directly
    claim = h.projection.open_jobs["j"].last_seen_at
    assert heard == h.projection.parking.latest("j") and claim is not None and heard >= parse_time(claim), (
        "the lease counts from the held output"
    )
    lease = Limits(lease=2)
    assert on_clock(h.projection.open_jobs, heard + timedelta(seconds=1.9), lease, seen={"j": heard}) == []
    assert on_clock(h.projection.open_jobs, heard + timedelta(seconds=2.1), lease, seen={"j": heard}) != []


@pytest.mark.fast
def test_a_started_that_never_comes_is_inferred_and_the_job_ends_as_its_runner_said(tmp_path: Path) -> None:
    h, r = Harness(tmp_path, ParkLimits(settle=5)), Runner("j")
    h.fold(("j", r.submitted()), ("j", r.claimed()), ("j", r.heartbeat(0)))
    held = h.fold(*[("j", r.output(n)) for n in range(3)], ("j", r.succeeded(3)))
    assert held.held == 4 and held.rejections == [], "they follow a `started` not received yet"
    assert judge(h, 4).records == {}, "within --settle-outputs they wait"
    h.projection = h.fresh()  # held on disk: a restart keeps them
    inferred = judge(h, 6)
    assert inferred.rejections == []
    record = inferred.records["j"]
    assert record.status.value == "succeeded" and record.start_inferred is True and record.started_at
    assert (record.outputs_expected, record.outputs_missing, record.output_seqs) == (3, [], [(0, 2)])
    logged = h.logged("j")
    assert [kind for kind, _ in logged] == [
        "submitted",
        "claimed",
        "heartbeat",
        "started",
        "output",
        "output",
        "output",
        "succeeded",
    ]
    assert not logged[3][1].startswith("j-"), "the start is the projector's (a derived id)"
    assert not h.parked_file("j").exists()
    h.assert_rebuildable("j")
    # The runner's own `started` comes after all (a resend, a redelivery): logged, nothing else changes.
    late = h.fold(("j", r.started()), ("j", r.heartbeat(1)))
    assert late.rejections == [], "neither the late start nor the late heartbeat is refused"
    assert h.logged("j")[-1] == ("started", "j-st"), "the late heartbeat is dropped, not logged"
    after = late.records["j"]
    assert (after.status, after.started_at, after.version) == (record.status, record.started_at, record.version + 1)
    h.assert_rebuildable("j")


@pytest.mark.fast
def test_a_started_that_comes_in_time_is_not_inferred(tmp_path: Path) -> None:
    h, r = Harness(tmp_path, ParkLimits(settle=5)), Runner("j")
    h.fold(("j", r.submitted()), ("j", r.claimed()), ("j", r.output(0)))
    done = h.fold(("j", r.started()), ("j", r.succeeded(1)))
    record = done.records["j"]
    assert record.status.value == "succeeded" and record.start_inferred is UNSET
    assert [kind for kind, _ in h.logged("j")] == ["submitted", "claimed", "started", "output", "succeeded"]
    assert json.loads(h.registry.read_bytes("j") or b"{}").get("start_inferred") is None


@pytest.mark.fast
def test_a_late_started_from_another_runner_or_unsigned_is_still_refused(tmp_path: Path) -> None:
    h, r = Harness(tmp_path, ParkLimits(settle=1)), Runner("j")
    h.fold(("j", r.submitted()), ("j", r.claimed()), ("j", r.output(0)), ("j", r.succeeded(1)))
    assert judge(h, 2).records["j"].start_inferred is True
    other = Runner("j", "r1")  # the same name, another key: not the claim's
    forged = h.fold(("j", other.started()))
    assert [r.event_id for r in forged.rejections] == ["j-st"]
    assert "only that runner may publish" in forged.rejections[0].reason
    unsigned = h.fold(("j", ev.encode_event(ev.Started(id="j-st2", runner="r1"))))
    assert [r.event_id for r in unsigned.rejections] == ["j-st2"]


async def test_over_nats_a_lost_started_still_records_the_runners_outcome_and_a_late_one_is_logged(
    nats: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """The soak's case, with the projector and nats-server as processes: the claim and a heartbeat are
    recorded, the `started` is not published (the broker lost it), the outputs and the outcome are. The
    job must end `succeeded` with every output, nothing refused; the `started` published later is logged."""
    ws_id, r = workspace_id(ws.root), Runner("lost-start")
    topic = f"mam/{ws_id}/jobs/{r.job_id}/events"
    flags = ("--lease", "3", "--settle-outputs", "1")
    async with projector_process(nats, ws.root, ws.elsewhere, log_dir=tmp_path, extra=flags):
        async with _client(nats.url) as client:
            for payload in (r.submitted(), r.claimed(), r.heartbeat(0)):
                await client.publish(topic, payload, qos=1)
            await wait_for_state(nats.url, ws_id, r.job_id, lambda s: s.get("last_heartbeat_at") is not None)
            for payload in [*(r.output(n) for n in range(8)), r.succeeded(8)]:
                await client.publish(topic, payload, qos=1)
            done = await wait_for_state(
                nats.url, ws_id, r.job_id, lambda s: s["status"] not in ("claimed", "running"), timeout=30
            )  # its end: `running` may be published on the way
            assert (done["status"], done.get("start_inferred")) == ("succeeded", True), done.get("error")
            assert (done["outputs_expected"], done["outputs_missing"], done["output_seqs"]) == (8, [], [[0, 7]])
            for payload in (r.heartbeat(1), r.started()):  # late: a redelivery, or the runner sending again
                await client.publish(topic, payload, qos=1)
            late = await wait_for_state(nats.url, ws_id, r.job_id, lambda s: s["last_event_id"] == f"{r.job_id}-st")
    assert late["status"] == "succeeded" and late["version"] == done["version"] + 1
    assert refusals(ws) == []
    logs = await run(mam("logs", r.job_id, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert logs.returncode == 0 and logs.stdout.decode().splitlines() == [f"line {n}" for n in range(8)]
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.slow  # 6-7 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_over_nats_a_runner_whose_started_is_late_is_not_judged_lost_while_it_talks(
    nats: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """The claim is recorded, then for longer than the lease only outputs come (held for the `started`,
    which is late): the job is not lost; when the `started` comes they are applied after it, in order."""
    ws_id, r = workspace_id(ws.root), Runner("late-start")
    topic = f"mam/{ws_id}/jobs/{r.job_id}/events"
    flags = ("--lease", "3", "--settle-outputs", "60")
    async with projector_process(nats, ws.root, ws.elsewhere, log_dir=tmp_path, extra=flags):
        async with _client(nats.url) as client:
            for payload in (r.submitted(), r.claimed()):
                await client.publish(topic, payload, qos=1)
            await wait_for_state(nats.url, ws_id, r.job_id, lambda s: s["status"] == "claimed")
            for n in range(10):  # 5 s of output, well past the lease, none of it applicable yet
                await client.publish(topic, r.output(n), qos=1)
                await anyio.sleep(0.5)  # the scenario's pace (a line every 0.5 s), not a wait for a result
            for payload in (r.started(), r.succeeded(10)):
                await client.publish(topic, payload, qos=1)
            done = await wait_for_state(
                nats.url, ws_id, r.job_id, lambda s: s["status"] not in ("claimed", "running"), timeout=30
            )  # its end: `running` may be published on the way
    assert done["status"] == "succeeded", done.get("error")
    assert "start_inferred" not in done and (done["outputs_missing"], done["output_seqs"]) == ([], [[0, 9]])
    assert refusals(ws) == []
