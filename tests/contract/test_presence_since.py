"""SINCE (`mam.contract.presence.since`), one meaning for every runner: when its current status began.
Online since it came online (not moved as it republishes its jobs), offline since it stopped; a will
cannot say when its runner went offline, so no time (`-` in `mam agents`). Generated statuses (hypothesis)
never give another time than those."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from mam.cli.tables import agent_row
from mam.contract.presence import last_heard, since, visible
from mam.contract.status import AgentStatus

pytestmark = pytest.mark.fast

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
STARTED, CONNECTED, CHANGED = "2026-05-01T09:00:00Z", "2026-05-01T11:00:00Z", "2026-05-01T11:59:50Z"


def _status(status: str, **fields: object) -> AgentStatus:
    return AgentStatus(
        status=status,
        agent="shell",
        agent_id="r1",
        epoch="e",
        pid=1,
        host="h",  # type: ignore[arg-type]
        started_at=STARTED,
        **fields,
    )  # type: ignore[arg-type]


def _since_cell(status: AgentStatus) -> str:
    return agent_row(status, NOW)[4]


def test_online_is_since_it_came_online_not_its_last_republish() -> None:
    online = _status("online", updated_at=CHANGED, online_since=CONNECTED, jobs=["j1"])
    assert since(online) == CONNECTED and _since_cell(online) == "1h ago"
    older = _status("online", updated_at=CHANGED)  # a runner from before `online_since`: since it started
    assert since(older) == STARTED and _since_cell(older) == "3h ago"


def test_offline_is_since_it_stopped_and_a_will_has_no_time() -> None:
    stopped = _status("offline", updated_at=CHANGED, online_since=CONNECTED)
    assert since(stopped) == CHANGED and _since_cell(stopped) == "10s ago"
    will = _status("offline", updated_at=CONNECTED, online_since=CONNECTED, will=True)
    assert since(will) is None and _since_cell(will) == "-"
    assert last_heard(will) == CONNECTED, "when it was last surely alive stays readable"


def test_a_will_is_hidden_a_day_after_its_runner_connected_unless_all_are_asked_for() -> None:
    fresh = _status("offline", updated_at=CONNECTED, online_since=CONNECTED, will=True)
    old = _status("offline", updated_at="2026-04-29T11:00:00Z", online_since="2026-04-29T11:00:00Z", will=True)
    assert visible([fresh, old], NOW) == [fresh]
    assert visible([fresh, old], NOW, everything=True) == [fresh, old]


times = st.sampled_from([STARTED, CONNECTED, CHANGED])


@given(
    st.sampled_from(["online", "offline"]),
    st.one_of(st.none(), times),
    st.one_of(st.just(UNSET), times),
    st.sampled_from([UNSET, True]),
)
def test_since_is_always_one_of_the_times_its_meaning_allows(
    status: str, updated: str | None, came: object, will: object
) -> None:
    value = since(_status(status, updated_at=updated, online_since=came, will=will))
    if status == "online":
        assert value == (came if came is not UNSET else STARTED)
    elif will is True:
        assert value is None
    else:
        assert value == (updated or STARTED)
