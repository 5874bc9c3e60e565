"""Who may speak for a claimed job: the projector's side of runner identity (`mam.contract.identity`).

A job whose claim named a key (`JobRecord.runner_key`) takes its runner's
events (`events.SIGNED_TYPES`) only signed by that key; anything else for it
is refused with the reason, on `rejected`. A runner status (its will above
all) of an instance holding such a job counts only if it verifies with that
key; an `offline` that does not is ignored and its refusal published, so a
client that copied the runner's epoch cannot end its jobs.

Only a signed claim starts a job: a `claimed` must name a `runner_key` and be
signed by it, unless the workspace allows unsigned runners
(`mam.contract.runner_trust`); and a runner's `started` or `cancelled` for a
job no runner holds (submitted, blocked, retrying) is refused, so no bare
`started` skips the claim's checks (labels, fleet limits, the key). A job
claimed without a key (allowed that way, or before this rule) is not
protected: everything stays as it was.

A signature covers the workspace as well as the job (`EventSignatures`), so a
runner's events captured in one workspace and published in another are refused
there; the old form, over the job alone, is taken during a transition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from msgspec import UNSET
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract import identity, inferred_start, output_accounting
from mam.contract.record import JobRecord
from mam.contract.release import HELD
from mam.contract.runner_trust import OLD_SIGNATURES
from mam.contract.signing import BadSignature
from mam.contract.status import AgentStatus

log = logging.getLogger("mam.projector")


class EventSignatures:
    """How a runner's event signature is checked (docs/design/runners.md, Runner identity): over the workspace and the
    job (`identity.event_context`), so a signed event captured in one workspace is no event in another. The old
    form, over the job alone (runners before workspace signatures), is taken during the transition unless the
    workspace refuses it (`old_form`, `.mam/config.json` `"old_runner_signatures": false`); the first event each
    runner key signs that way is logged. A key seen signing the old way is tried that way first."""

    MOST = 4096

    def __init__(self, workspace: str, *, old_form: bool = True) -> None:
        self.workspace = workspace
        self.old_form = old_form
        self._old: set[str] = set()
        """Runner keys that signed an event the old way (logged once each)."""

    def verify(self, signed: bytes, key: str, job_id: str, runner: str) -> None:
        """Return if `signed` verifies with `key` for `job_id` in this workspace (or, taken, the old way); else
        raise BadSignature saying why."""
        if not identity.is_signed(signed):
            raise BadSignature("it carries no signature")
        new, old = identity.event_context(job_id, self.workspace), identity.event_context(job_id)
        for context in (old, new) if key in self._old else (new, old):
            try:
                identity.verify(signed, key, context)
            except BadSignature:
                continue
            if context is old:
                self._old_form(key, runner)
            return
        raise BadSignature(f"its signature does not verify for job {job_id!r} in workspace {self.workspace!r}")

    def _old_form(self, key: str, runner: str) -> None:
        if not self.old_form:
            raise BadSignature(
                f"is signed the old way, over the job alone and not the workspace (a runner older "
                f"than workspace signatures), which this workspace refuses (.mam/config.json: "
                f'"{OLD_SIGNATURES}": false)'
            )
        if key in self._old:
            return
        if len(self._old) >= self.MOST:
            self._old.clear()
        self._old.add(key)
        log.warning(
            "runner %r (key %s) signs its events the old way, over the job and not the workspace (a "
            "mam-agent older than workspace signatures, or a script): taken during the transition, but such "
            "events could be replayed into another workspace; upgrade it, or refuse them with "
            '"%s": false in .mam/config.json (docs/security.md)',
            runner,
            key,
            OLD_SIGNATURES,
        )


NEED_A_HOLDER: Final = frozenset({"started", "cancelled"})
"""Runner events refused at once for a job no runner holds. The runner's other events of such a job
(`parking.AFTER_A_CLAIM`) wait for the claim they follow, and are refused when that wait ends."""


def event_refusal(
    record: JobRecord | None,
    job_id: str,
    event: ev.AnyEvent,
    signed: bytes | None,
    *,
    unsigned_runners: bool = False,
    signatures: EventSignatures | None = None,
) -> str | None:
    """Why `event` may not be applied to `record`, or None: a claim that names no key (unless
    `unsigned_runners`) or that its key does not sign, a `started`/`cancelled` for a job no runner
    holds, or a runner event its claim's key does not sign (as `signatures` checks; None: the old
    form alone, as before workspace signatures: the rules' own tests).

    A finished job is left to the fold, whose reason (a finished job never changes) is the one that
    holds whoever sent the event; except a late output the record names as missing, which the fold
    would take, and a late `started` after an inferred one (`mam.contract.inferred_start`)."""
    if isinstance(event, ev.Claimed):
        return claim_refusal(job_id, event, signed, unsigned_runners=unsigned_runners, signatures=signatures)
    if (unheld := unclaimed_refusal(record, job_id, event)) is not None:
        return unheld
    if record is None or not isinstance(record.runner_key, str) or ev.event_type(event) not in ev.SIGNED_TYPES:
        return None
    if (
        record.status.terminal
        and not output_accounting.fills_gap(record, event)
        and not inferred_start.is_late_start(record, event)
    ):
        return None
    kind = ev.event_type(event)
    try:
        _verify(signed, record.runner_key, job_id, record.runner or "?", signatures)
    except BadSignature as exc:
        return (
            f"job {job_id!r} was claimed by runner {record.runner!r} with key {record.runner_key}: "
            f"only that runner may publish its {kind!r}, and this one {exc}; not applied"
        )
    return None


def claim_refusal(
    job_id: str,
    claim: ev.Claimed,
    signed: bytes | None,
    *,
    unsigned_runners: bool,
    signatures: EventSignatures | None = None,
) -> str | None:
    """Why a claim is refused for who makes it: it names no key (and the workspace does not take unsigned
    runners), or the key it names does not sign it. None: the fold judges it."""
    if not isinstance(claim.runner_key, str):
        if unsigned_runners:
            return None
        return (
            f"job {job_id!r}: claim by {claim.runner!r} refused: it names no runner_key. A runner signs its claim "
            "and events with a key of its own (mam-agent does; by hand: docs/remote-runners.md#a-runner-of-your-own), "
            'or the workspace takes unsigned runners: "unsigned_runners": true in .mam/config.json'
        )
    try:
        _verify(signed, claim.runner_key, job_id, claim.runner, signatures)
    except BadSignature as exc:
        return f"job {job_id!r}: claim by {claim.runner!r} refused: it names runner_key {claim.runner_key} but {exc}"
    return None


def _verify(signed: bytes | None, key: str, job_id: str, runner: str, signatures: EventSignatures | None) -> None:
    if signed is None:
        raise BadSignature("it carries no signature")
    if signatures is None:
        identity.verify(signed, key, identity.event_context(job_id))
    else:
        signatures.verify(signed, key, job_id, runner)


def unclaimed_refusal(record: JobRecord | None, job_id: str, event: ev.AnyEvent) -> str | None:
    """Why a runner's `started` or `cancelled` is refused for a job no runner holds, or None."""
    kind = ev.event_type(event)
    if record is None or kind not in NEED_A_HOLDER or record.status.terminal or record.status in HELD:
        return None
    return (
        f"job {job_id!r} is {record.status.value}: no runner holds a claim on it, so its {kind!r} is refused; "
        "a runner publishes 'claimed' (signed, naming its runner_key) and waits for the job's state to name it "
        "before it starts the job"
    )


def verified_status(status: AgentStatus, payload: bytes, open_jobs: Iterable[JobRecord]) -> AgentStatus | str:
    """The status with `runner_key` set to the key of the runner's open jobs it verifies with (UNSET when
    none of its jobs has one: then only jobs claimed without a key may be ended by it), or why it is
    ignored: the instance holds jobs claimed with a key and the status is not signed by any of them."""
    keys = sorted(
        {
            r.runner_key
            for r in open_jobs
            if r.runner == status.agent_id and r.runner_epoch == status.epoch and isinstance(r.runner_key, str)
        }
    )
    if not keys:
        return replace(status, runner_key=UNSET, sig=UNSET)
    why = "it carries no signature"
    for key in keys:
        try:
            identity.verify(payload, key, identity.STATUS_CONTEXT)
        except BadSignature as exc:
            why = str(exc)
            continue
        return replace(status, runner_key=key, sig=UNSET)
    return (
        f"runner {status.agent_id!r} (epoch {status.epoch}) holds jobs claimed with key "
        f"{', '.join(keys)}; this {status.status!r} status {why} with it: ignored, its jobs run on"
    )


def ends(record: JobRecord, will: AgentStatus) -> bool:
    """Whether a (verified) will ends this job: same runner instance, and the key it verified with is the
    job's claim's (a will no key verified ends only jobs claimed without one)."""
    if record.runner != will.agent_id or record.runner_epoch != will.epoch:
        return False
    return (
        record.runner_key == will.runner_key
        if isinstance(record.runner_key, str)
        else not isinstance(will.runner_key, str)
    )
