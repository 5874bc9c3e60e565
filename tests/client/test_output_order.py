"""A follower prints a runner's output in its order whatever order the broker delivers it in
(mam.client.output_order), and never drops or doubles a line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mam.client.output_order import HELD_MAX, InOrder
from mam.contract import events as ev

pytestmark = pytest.mark.fast


def outputs(n: int) -> list[ev.Output]:
    return [ev.Output(text=f"line {i}\n", seq=i) for i in range(n)]


def deliver(order: InOrder, arriving: list[ev.Output]) -> list[int | None]:
    shown: list[int | None] = []
    for event in arriving:
        shown += [e.seq for e in order.take(event)]
    shown += [e.seq for e in order.release()]
    return shown


@given(st.permutations(list(range(40))))
def test_any_delivery_order_prints_the_runners_order(perm: list[int]) -> None:
    events = outputs(40)
    order = InOrder()
    order.started()
    assert deliver(order, [events[i] for i in perm]) == list(range(40))


@given(st.lists(st.integers(0, 29), min_size=1, max_size=60), st.integers(0, 30))
def test_whatever_arrives_is_printed_once_per_arrival_and_nothing_is_invented(arrivals: list[int], joined: int) -> None:
    """Duplicates are the caller's to drop by id; here every arrival is printed exactly once, late or not."""
    events = outputs(30)
    order = InOrder()
    if joined:
        order.expect(joined)  # a follower that printed the log up to `joined`
    shown = deliver(order, [events[i] for i in arrivals])
    assert sorted(s for s in shown if s is not None) == sorted(arrivals)


def test_a_gap_that_never_fills_holds_at_most_held_max_then_lets_the_rest_out_in_order() -> None:
    events = outputs(HELD_MAX + 3)
    order = InOrder()
    order.started()
    shown = []
    for event in events[1:]:  # seq 0 never arrives
        shown += [e.seq for e in order.take(event)]
    assert shown[: HELD_MAX + 1] == list(range(1, HELD_MAX + 2))  # let out once more than HELD_MAX were held
    assert shown == list(range(1, HELD_MAX + 3))
    assert order.held == {}
    assert [e.seq for e in order.take(events[0])] == [0]  # the lost one, late: still printed


def test_a_new_attempt_lets_out_what_the_last_one_held_and_counts_from_zero() -> None:
    order = InOrder()
    order.started()
    first = outputs(3)
    assert order.take(first[2]) == []
    assert [e.seq for e in order.started()] == [2]
    assert [e.seq for e in order.take(outputs(1)[0])] == [0]


def test_output_without_seq_is_printed_as_it_comes() -> None:
    order = InOrder()
    order.started()
    plain = ev.Output(text="x\n")
    assert order.take(ev.Output(text="b\n", seq=1)) == []
    assert order.take(plain) == [plain]
    assert order.held_bytes == 2
