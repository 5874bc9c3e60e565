"""Jobs' own logins on `mam up`'s broker: a job delegates and asks, and does nothing else.

A runner hands its job the login `job:<job_id>` with a token only it can make
(`mam.contract.job_login`), not its own password. `mam up` with a password file
takes such logins (`JobLoginPlugin`) while the job's record says it runs on the
attempt and under the key the token was made for, and closes their connections
once a state says otherwise (`JobLogins.saw_state`). What a job's login may do
(`JobLogins.may`, `JobLogins.may_send`):

- publish on the workspace's `jobs/<id>/events`, only these events: `submitted`
  whose `parent` is its own job (children: `mam submit` inside a job);
  `input_requested` and `input_withdrawn` for its own job (`mam ask`);
  `cancel_requested` for its own job or one under it, `input_provided` for one
  under it (a parent answering its child). Anything else (a `claimed`, another
  job's output, a root job) is refused with the reason on `rejected`, never
  recorded and never delivered; nothing else on any other topic, and no will;
- read the projector's status and refusals, the runners' statuses, and the
  state and events of its own job and of every job under it, each by its exact
  topic (no wildcards: a broker replays retained states before asking about
  them). A job not recorded yet may be subscribed to (a child about to be
  submitted); what is delivered on it then is checked when it comes.

"Under it" means the job's `parent` chain in the registry reaches this job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from amqtt.contexts import BaseContext
from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session

from mam.broker.acl import READ, WRITE, within
from mam.broker.notices import Notice
from mam.contract import events as ev
from mam.contract.attempts import attempt_of
from mam.contract.job_login import LIVE, is_job_user, is_token, job_of, refusal, user_of
from mam.contract.record import JobRecord
from mam.contract.topics import Kind, Topics

log = logging.getLogger("mam.broker")

Lookup = Callable[[str], JobRecord | None]
"""A job's record from the registry, None if it has none; may raise if it cannot be read."""
MAX_DEPTH = 64
"""Parent links followed to tell whether a job lies under another (a tree deeper than this is not)."""
MOST_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class Refusal:
    """A job's publish refused by the broker: published on `rejected` by `mam up`'s projector."""

    topic: str
    job_id: str | None
    event_id: str | None
    reason: str
    login: str


class JobLogins:
    """The job logins of one workspace's broker (see the module docstring)."""

    def __init__(self, workspace_id: str, lookup: Lookup, *, on_refused: Callable[[Refusal], None] | None = None):
        self.topics = Topics(workspace_id)
        self.lookup = lookup
        self.on_refused = on_refused
        self.live: dict[str, tuple[int, str]] = {}
        """Each job with a login taken, and the attempt and runner key it was taken for."""
        self.disconnect: Callable[[str], int] | None = None
        """Set by the broker: close every connection of a user name; returns how many."""
        self._under: dict[tuple[str, str], bool] = {}
        """(ancestor, job) -> whether job lies under ancestor: a recorded job's parent never changes."""
        self.refused_logins = Notice()
        self.refused_sends = Notice()

    # --- logging in -------------------------------------------------------------------------------

    def login(self, user: str | None, password: str | None, *, clean: bool) -> str | None:
        """Why this login is refused, or None (the job is then live until its state says otherwise)."""
        job_id = job_of(user)
        if job_id is None:
            return "the user name is job: and no job id"
        if not clean:
            return "a job's login takes a clean session only"
        if not is_token(password):  # before the registry is read for it
            return "the password is not a job login token (<attempt>.<signature>)"
        record = self._record(job_id)
        if record is None:
            return f"no job {job_id} is recorded"
        reason = refusal(password or "", workspace_id=self.topics.workspace, record=record)
        if reason is None:
            self.live[job_id] = (attempt_of(record), str(record.runner_key))
        return reason

    def saw_state(self, topic: str) -> None:
        """A state the projector just published: a job whose login is live and that no longer runs on the
        attempt and key it logged in with loses its connections (its record is already written)."""
        parsed = self.topics.parse(topic)
        job_id = parsed.job_id if parsed is not None and parsed.kind is Kind.STATE else None
        if job_id is None or job_id not in self.live:
            return
        record = self._record(job_id)
        if (
            record is not None
            and record.status in LIVE
            and self.live[job_id] == (attempt_of(record), record.runner_key)
        ):
            return
        del self.live[job_id]
        self._under = {pair: under for pair, under in self._under.items() if pair[0] != job_id}
        closed = self.disconnect(user_of(job_id)) if self.disconnect is not None else 0
        log.info("job %s ended or moved on: its login is refused from now on (%d connection(s) closed)", job_id, closed)

    # --- topics -----------------------------------------------------------------------------------

    def may(self, access: str, user: str, topic: str) -> bool:
        """Whether job login `user` may write (publish) or read (subscribe, receive) `topic`."""
        job_id = job_of(user)
        if job_id is None:
            return False
        parsed = self.topics.parse(topic)
        if parsed is None:
            return False
        if access == WRITE:
            return parsed.kind is Kind.EVENTS and job_id in self.live  # what is sent: `may_send`
        if access != READ:
            return False
        if parsed.kind in (Kind.PROJECTOR_STATUS, Kind.REJECTED):
            return True
        if parsed.kind is Kind.AGENT_STATUS:
            return within(topic, self.topics.all_agent_status)
        target = parsed.job_id
        if target is None or target in ("+", "#"):
            return False
        return target == job_id or self._under_or_unrecorded(target, job_id)

    def may_receive(self, user: str, topic: str) -> bool:
        """A delivery on a job's topic: only for a job recorded under this one (or this one)."""
        job_id = job_of(user)
        parsed = self.topics.parse(topic)
        if job_id is None or parsed is None:
            return False
        if parsed.job_id is None:
            return self.may(READ, user, topic)
        return parsed.job_id == job_id or self._lies_under(parsed.job_id, job_id)

    def may_send(self, user: str | None, topic: str, payload: bytes) -> bool:
        """Whether what a client publishes on an events topic passes: anything from a client that is
        not a job's login; from a job's login, see the module docstring (a refusal is reported)."""
        if not is_job_user(user):
            return True
        assert user is not None
        job_id = job_of(user)
        parsed = self.topics.parse(topic)
        target = parsed.job_id if parsed is not None and parsed.kind is Kind.EVENTS else None
        event: ev.AnyEvent | None = None
        if job_id is None or job_id not in self.live:
            reason: str | None = "this job's login ended with the job"
        elif target is None:
            reason = "a job's login publishes only on a job's events topic"
        else:
            try:
                event = ev.decode_event(payload)
            except Exception as exc:  # noqa: BLE001 - whatever fails to decode is refused, never raised
                reason = f"not an event ({str(exc)[:200] or type(exc).__name__})"
            else:
                reason = self._send_refusal(job_id, target, event)
        if reason is None:
            return True
        self._refuse(user, topic, target, event, reason)
        return False

    def _send_refusal(self, job_id: str, target: str, event: ev.AnyEvent) -> str | None:
        if isinstance(event, ev.Submitted):
            if event.parent == job_id:
                return None
            return (
                f"job {job_id}'s login submits only its own children: parent must be {job_id}, "
                f"not {event.parent or 'none (a root job)'}"
            )
        if isinstance(event, ev.InputRequested | ev.InputWithdrawn):
            return None if target == job_id else f"job {job_id}'s login asks questions for job {job_id} only"
        if isinstance(event, ev.CancelRequested):
            if target == job_id or self._lies_under(target, job_id):
                return None
            return f"job {job_id}'s login cancels only job {job_id} and the jobs under it, not {target}"
        if isinstance(event, ev.InputProvided):
            if self._lies_under(target, job_id):
                return None
            return f"job {job_id}'s login answers only the jobs under it, not {target}"
        return (
            f"job {job_id}'s login may not publish {ev.event_type(event)}: only submitted (its children), "
            "input_requested and input_withdrawn (its own), cancel_requested and input_provided (jobs under it)"
        )

    def _refuse(self, user: str, topic: str, target: str | None, event: ev.AnyEvent | None, reason: str) -> None:
        self.refused_sends(f"refused a publish of {user} on {topic}: {reason}")
        if self.on_refused is not None:
            event_id = event.id if event is not None else None
            self.on_refused(Refusal(topic=topic, job_id=target, event_id=event_id, reason=reason, login=user))

    # --- the tree ---------------------------------------------------------------------------------

    def _under_or_unrecorded(self, target: str, ancestor: str) -> bool:
        """A subscription: to a job under `ancestor`, or to one not recorded yet (its child to be)."""
        try:
            if self.lookup(target) is None:
                return True
        except Exception:  # noqa: BLE001 - a record that cannot be read is no job of this login's
            return False
        return self._lies_under(target, ancestor)

    def _lies_under(self, job_id: str, ancestor: str) -> bool:
        """Whether `job_id`'s parent chain reaches `ancestor` (remembered once known: parents never change)."""
        key = (ancestor, job_id)
        known = self._under.get(key)
        if known is not None:
            return known
        found, current = False, job_id
        for _ in range(MAX_DEPTH):
            record = self._record(current)
            if record is None or record.parent is None:
                if record is None and current == job_id:
                    return False  # not recorded (yet): nothing to remember
                break
            if record.parent == ancestor:
                found = True
                break
            current = record.parent
        if len(self._under) >= MOST_REMEMBERED:
            self._under.clear()
        self._under[key] = found
        return found

    def _record(self, job_id: str) -> JobRecord | None:
        try:
            return self.lookup(job_id)
        except Exception as exc:  # noqa: BLE001 - an unreadable record is no live job
            log.debug("cannot read the record of job %s: %s", job_id, exc)
            return None


class JobLoginPlugin(BaseAuthPlugin):
    """amqtt's authentication hook for job logins (`job:<id>`): True or False for those, None for any other
    user (the password file decides). A job's login never has a will."""

    @dataclass
    class Config:
        policy: str = ""

    def __init__(self, context: BaseContext) -> None:
        from mam.broker.acl import policy_of

        super().__init__(context)
        jobs = policy_of(self.config.policy).jobs
        assert jobs is not None, "JobLoginPlugin is configured only for a policy with job logins"
        self.jobs = jobs

    async def authenticate(self, *, session: Session) -> bool | None:
        if session is None or not is_job_user(session.username):
            return None
        session.will_flag = False
        session.will_topic = session.will_message = None
        reason = self.jobs.login(session.username, session.password, clean=bool(session.clean_session))
        if reason is not None:
            self.jobs.refused_logins(f"refused the login of {session.username} from {session.remote_address}: {reason}")
            return False
        return True


__all__ = ["JobLoginPlugin", "JobLogins", "Lookup", "Refusal"]
