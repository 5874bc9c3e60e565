"""A runner's events for one job, signed with the key its claim names, as mam-agent signs them."""

from __future__ import annotations

from mam.contract import events as ev
from mam.contract.identity import RunnerKey


class SignedRunner:
    """Events of `job_id` signed over `workspace` and the job (`None`: the old form, over the job alone)."""

    def __init__(self, job_id: str, workspace: str | None, name: str = "r1", key: RunnerKey | None = None) -> None:
        self.job_id, self.workspace, self.name, self.key = job_id, workspace, name, key or RunnerKey()

    def submitted(self) -> bytes:
        return ev.encode_event(ev.Submitted(id=f"{self.job_id}-s", prompt="p", agent="a"))

    def claimed(self) -> bytes:
        return self.signed(ev.Claimed(id=f"{self.job_id}-c", runner=self.name, epoch="e1", runner_key=self.key.public))

    def started(self) -> bytes:
        return self.signed(ev.Started(id=f"{self.job_id}-st", runner=self.name, pid=42, counts_outputs=True))

    def output(self, seq: int) -> bytes:
        return self.signed(ev.Output(id=f"{self.job_id}-o{seq}", text=f"line {seq}\n", seq=seq))

    def succeeded(self, outputs: int) -> bytes:
        return self.signed(ev.Succeeded(id=f"{self.job_id}-z", exit_code=0, outputs=outputs))

    def signed(self, event: ev.AnyEvent) -> bytes:
        return self.key.sign_event(self.job_id, ev.encode_event(event), self.workspace)
