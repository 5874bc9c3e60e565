"""A job's login, the pure parts: the token (`mam.contract.job_login`), what the broker lets such a login
do (`mam.broker.job_logins.JobLogins`, over records in a dict) and which URL a runner hands its job
(`mam.agents.job_broker`). End to end: tests/agents/test_job_logins.py."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.agents.job_broker import JobBroker
from mam.broker.acl import READ, WRITE, Policy, parse_acl
from mam.broker.job_logins import JobLogins, Refusal
from mam.contract import events as ev
from mam.contract.broker_list import parse_broker_urls
from mam.contract.broker_url import parse_broker_url
from mam.contract.fold import Context, apply
from mam.contract.identity import RunnerKey
from mam.contract.job_login import job_of, mint, refusal, user_of
from mam.contract.record import JobRecord
from mam.contract.topics import Topics

pytestmark = pytest.mark.fast

WS = "ws1"
T = Topics(WS)
KEY = RunnerKey()


def _record(job_id: str, *events: ev.AnyEvent) -> JobRecord:
    state: object = None
    for n, event in enumerate(events):
        state = apply(
            state,
            event,
            Context(job_id=job_id, workspace=WS, event_id=f"{job_id}-e{n}", received_at="2026-01-01T00:00:00.000Z"),
        )
        assert isinstance(state, JobRecord), state
    assert isinstance(state, JobRecord)
    return state


def _running(job_id: str, parent: str | None = None, key: RunnerKey = KEY) -> JobRecord:
    return _record(
        job_id,
        ev.Submitted(prompt="p", agent="a", parent=parent),
        ev.Claimed(runner="r1", epoch="e1", runner_key=key.public, expected_version=1),
        ev.Started(),
    )


def _submitted(job_id: str, parent: str | None = None) -> JobRecord:
    return _record(job_id, ev.Submitted(prompt="p", agent="a", parent=parent))


# --- the token ------------------------------------------------------------------------------------------------


def test_a_token_is_taken_only_for_the_job_attempt_and_key_it_was_made_for_while_the_job_runs() -> None:
    record = _running("job-a")
    token = mint(KEY, WS, "job-a", 1)
    assert refusal(token, workspace_id=WS, record=record) is None
    assert user_of("job-a") == "job:job-a" and job_of("job:job-a") == "job-a"
    assert job_of("alice") is None and job_of("job:") is None and job_of("job:a/b") is None

    other_key = mint(RunnerKey(), WS, "job-a", 1)
    assert "does not verify with the key of job job-a's claim" in str(
        refusal(other_key, workspace_id=WS, record=record)
    )
    other_ws = mint(KEY, "ws2", "job-a", 1)
    assert "does not verify" in str(refusal(other_ws, workspace_id=WS, record=record))
    other_job = mint(KEY, WS, "job-b", 1)
    assert "does not verify" in str(refusal(other_job, workspace_id=WS, record=record))
    assert "for attempt 2; job job-a is on attempt 1" in str(
        refusal(mint(KEY, WS, "job-a", 2), workspace_id=WS, record=record)
    )
    for junk in ("", "secret", "1.", "0." + "A" * 86, token + "x"):
        assert "not a job login token" in str(refusal(junk, workspace_id=WS, record=record)), junk

    done = _record(
        "job-a",
        ev.Submitted(prompt="p", agent="a"),
        ev.Claimed(runner="r1", runner_key=KEY.public, expected_version=1),
        ev.Started(),
        ev.Succeeded(exit_code=0),
    )
    assert "job job-a is succeeded: a job's login ends with the job" == refusal(token, workspace_id=WS, record=done)
    unsigned = _record("job-a", ev.Submitted(prompt="p", agent="a"), ev.Claimed(runner="r1", expected_version=1))
    assert "names no runner key" in str(refusal(token, workspace_id=WS, record=unsigned))
    assert "is submitted" in str(refusal(token, workspace_id=WS, record=_submitted("job-a")))


# --- what a job's login may do --------------------------------------------------------------------------------


class Tree:
    """job-a runs; job-a-1 is its child, job-a-1-1 its grandchild; stranger is nobody's."""

    def __init__(self) -> None:
        self.records = {
            "job-a": _running("job-a"),
            "job-a-1": _running("job-a-1", parent="job-a"),
            "job-a-1-1": _submitted("job-a-1-1", parent="job-a-1"),
            "stranger": _submitted("stranger"),
        }
        self.refused: list[Refusal] = []
        self.closed: list[str] = []
        self.jobs = JobLogins(WS, self.records.get, on_refused=self.refused.append)
        self.jobs.disconnect = lambda user: self.closed.append(user) or 1
        assert self.jobs.login("job:job-a", mint(KEY, WS, "job-a", 1), clean=True) is None

    def send(self, target: str, event: ev.AnyEvent | bytes) -> str | None:
        payload = event if isinstance(event, bytes) else ev.encode_event(event)
        before = len(self.refused)
        if self.jobs.may_send("job:job-a", T.events(target), payload):
            assert len(self.refused) == before
            return None
        assert len(self.refused) == before + 1
        return self.refused[-1].reason


def test_a_login_is_refused_unless_its_job_runs_with_a_clean_session() -> None:
    tree = Tree()
    token = mint(KEY, WS, "job-a", 1)
    assert tree.jobs.login("job:job-a", token, clean=False) == "a job's login takes a clean session only"
    assert tree.jobs.login("job:nobody", token, clean=True) == "no job nobody is recorded"
    assert tree.jobs.login("job:", token, clean=True) == "the user name is job: and no job id"
    assert "does not verify" in str(tree.jobs.login("job:job-a-1", token, clean=True))
    assert "not a job login token" in str(tree.jobs.login("job:nobody", "s3cret", clean=True)), "shape first"


def test_a_job_delegates_asks_and_cancels_within_its_tree_and_nothing_else() -> None:
    tree = Tree()
    assert tree.send("job-a-2", ev.Submitted(prompt="p", agent="a", parent="job-a")) is None
    assert tree.send("job-a", ev.InputRequested(question="Proceed?")) is None
    assert tree.send("job-a", ev.InputWithdrawn(reason="timeout")) is None
    for target in ("job-a", "job-a-1", "job-a-1-1"):
        assert tree.send(target, ev.CancelRequested(tree=True)) is None, target
    for target in ("job-a-1", "job-a-1-1"):
        assert tree.send(target, ev.InputProvided(answer="yes")) is None, target

    assert "parent must be job-a, not none (a root job)" in str(tree.send("x", ev.Submitted(prompt="p", agent="a")))
    assert "parent must be job-a, not stranger" in str(
        tree.send("x", ev.Submitted(prompt="p", agent="a", parent="stranger"))
    )
    assert "asks questions for job job-a only" in str(tree.send("job-a-1", ev.InputRequested(question="q")))
    assert "cancels only job job-a and the jobs under it, not stranger" in str(
        tree.send("stranger", ev.CancelRequested())
    )
    assert "answers only the jobs under it, not job-a" in str(tree.send("job-a", ev.InputProvided(answer="x")))
    assert "answers only the jobs under it, not nobody" in str(tree.send("nobody", ev.InputProvided(answer="x")))
    runner_events = [
        ev.Claimed(runner="r"),
        ev.Started(),
        ev.Output(text="x"),
        ev.Heartbeat(),
        ev.Succeeded(exit_code=0),
        ev.Failed(),
        ev.Released(),
        ev.Cancelled(),
        ev.Lost(),
        ev.Pruned(),
    ]
    for event in runner_events:
        reason = tree.send("job-a", event)
        assert f"may not publish {ev.event_type(event)}: only submitted" in str(reason), event


def test_whatever_a_job_sends_that_is_no_event_is_a_refusal_never_an_exception() -> None:
    tree = Tree()
    for payload in (
        b"",
        b"{",
        b"[]",
        b"null",
        b'{"type":"submitted"}',
        b"[" * 100_000,
        b'{"a":' * 50_000,
        b'{"type":"cancel_requested","id":"\\ud800"}',
        b"\xff\xfe",
        b"x" * 2_000_000,
    ):
        reason = tree.send("job-a-1", payload)
        assert reason is not None and reason.startswith("not an event"), (payload[:20], reason)
    assert tree.refused[-1].event_id is None and tree.refused[-1].login == "job:job-a"
    assert tree.jobs.may_send("alice", T.events("stranger"), b"[" * 100_000), "not a job's login: the projector judges"


def test_a_job_reads_its_tree_by_exact_topics_and_the_shared_ones() -> None:
    jobs = Tree().jobs
    user = "job:job-a"
    readable = [
        T.projector_status,
        T.rejected,
        T.all_agent_status,
        T.agent_status("r1"),
        T.state("job-a"),
        T.events("job-a"),
        T.state("job-a-1"),
        T.events("job-a-1-1"),
        T.state("not-yet"),
    ]
    for topic in readable:
        assert jobs.may(READ, user, topic), topic
    for topic in (
        T.all_states,
        T.all_events,
        T.everything,
        T.state("stranger"),
        T.events("stranger"),
        "mam/ws2/projector/status",
        "mam/+/rejected",
        "$SYS/broker/uptime",
        "mam/ws1/jobs/#",
    ):
        assert not jobs.may(READ, user, topic), topic
    assert not jobs.may_receive(user, T.state("not-yet")), "delivered only once recorded under it"
    assert jobs.may_receive(user, T.state("job-a-1-1")) and not jobs.may_receive(user, T.state("stranger"))
    for topic in (T.events("job-a"), T.events("stranger")):
        assert jobs.may(WRITE, user, topic), "what is sent there decides (may_send)"
    for topic in (
        T.state("job-a"),
        T.rejected,
        T.projector_status,
        T.agent_status("r1"),
        T.agent_offers("r1"),
        "mam/ws2/jobs/job-a/events",
        "elsewhere",
    ):
        assert not jobs.may(WRITE, user, topic), topic


def test_the_job_ending_closes_its_connections_and_refuses_what_its_login_still_sends() -> None:
    tree = Tree()
    tree.jobs.saw_state(T.state("job-a"))
    tree.jobs.saw_state(T.state("stranger"))
    assert tree.closed == [] and "job-a" in tree.jobs.live, "still running: nothing happens"
    tree.records["job-a"] = msgspec.structs.replace(tree.records["job-a"], runner_key=RunnerKey().public)
    tree.jobs.saw_state(T.state("job-a"))
    assert tree.closed == ["job:job-a"] and "job-a" not in tree.jobs.live, "another claim's key: ended for this login"
    assert tree.send("job-a-2", ev.Submitted(prompt="p", agent="a", parent="job-a")) == (
        "this job's login ended with the job"
    )
    assert not tree.jobs.may(WRITE, "job:job-a", T.events("job-a"))


def test_a_policy_hands_job_logins_to_their_rules_whatever_the_acl_file_says() -> None:
    tree = Tree()
    acl = parse_acl("user alice\ntopic readwrite mam/#\npattern readwrite mam/ws1/#\n")
    policy = Policy(acl=acl, login=True, workspace=WS, projector_client="secret", jobs=tree.jobs)
    assert not policy.may(READ, "job:job-a", "c1", T.all_states), "the %u/%c pattern does not reach a job's login"
    assert policy.may(READ, "job:job-a", "c1", T.state("job-a"))
    assert policy.may(READ, "alice", "c2", T.all_states) and policy.may(WRITE, "alice", "c2", T.events("x"))
    assert not policy.may_receive("job:job-a", "c1", T.state("stranger"))
    assert policy.may_receive("alice", "c2", T.state("stranger"))


# --- what the runner hands its job ------------------------------------------------------------------------------


def test_a_job_gets_a_login_of_its_own_where_the_broker_takes_one_and_the_runners_url_elsewhere() -> None:
    brokers = parse_broker_urls("mqtt://alice:s3cret@127.0.0.1:1883")
    runner_env = {"MAM_BROKER_URL": "mqtt://alice:s3cret@127.0.0.1:1883"}
    handed = JobBroker(brokers, WS, KEY)
    assert handed.url("job-a", 1, runner_env) == runner_env["MAM_BROKER_URL"], "no job logins announced: as before"
    assert handed.url("job-a", 1, {}) == brokers.full_url

    handed.taken = True
    url = handed.url("job-a", 2, runner_env)
    login = parse_broker_url(url)
    assert "s3cret" not in url and "alice" not in url, "the runner's environment does not reach the job either"
    assert (login.username, login.host, login.port) == ("job:job-a", "127.0.0.1", 1883)
    assert login.password == mint(KEY, WS, "job-a", 2)

    assert JobBroker(brokers, WS, KEY, "runner", taken=True).url("job-a", 1, {}) == brokers.full_url
    assert JobBroker(brokers, WS, KEY, "none", taken=True).url("job-a", 1, runner_env) == "mqtt://127.0.0.1:1883"
    several = parse_broker_urls("mqtt://alice:s3cret@a:1883,mqtt://alice:s3cret@b:1883")
    both = JobBroker(several, WS, KEY, taken=True).url("job-a", 1, {})
    assert [parse_broker_url(u).username for u in both.split(",")] == [
        "job:job-a",
        "job:job-a",
    ] and "s3cret" not in both
    with pytest.raises(ValueError):
        JobBroker(brokers, WS, KEY, "everything")


TREE = Tree()
"""One tree for every example (hypothesis runs a test's body many times)."""
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=st.binary(max_size=256) | JSON.map(lambda v: msgspec.json.encode(v)),
    kind=st.sampled_from(ev.EVENT_TYPES),
    fields=st.dictionaries(st.text(max_size=12), JSON, max_size=4),
)
def test_anything_a_job_sends_is_judged_without_an_exception(payload: bytes, kind: str, fields: dict) -> None:
    tree = TREE
    for sent in (payload, msgspec.json.encode({**fields, "type": kind})):
        before = len(tree.refused)
        verdict = tree.jobs.may_send("job:job-a", T.events("job-a-1"), sent)
        assert isinstance(verdict, bool) and len(tree.refused) == before + (not verdict)
