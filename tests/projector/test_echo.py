"""The projector's own status heard back (`projector/echo.py`): when the broker may hold or have dropped
what it has not read, no lease runs out. Pure: times are given, nothing is published."""

from __future__ import annotations

import logging

import pytest

from mam.projector.echo import GIVE_UP, MAX_UNHEARD, Echo


def echo_at(t: float, *, on: bool = True) -> Echo:
    echo = Echo(lag=2.0, every=10.0)
    echo.connected(on, t)
    return echo


def test_after_a_connect_the_view_waits_for_a_status_published_on_it() -> None:
    echo = echo_at(0.0)
    assert echo.behind(0.1) and echo.due(0.1), "nothing heard yet: what the broker queued is unread"
    echo.sent(b"old", 0.0)  # as published at the connect
    echo.heard(b"someone else's", 0.3)
    assert echo.behind(0.3), "a status it did not publish on this connection says nothing"
    echo.heard(b"old", 0.4)
    assert not echo.behind(0.4) and not echo.due(0.4)
    assert echo.dropped == 0


def test_a_stall_makes_it_wait_for_a_status_published_after_it() -> None:
    echo = echo_at(0.0)
    echo.sent(b"a", 0.0)
    echo.heard(b"a", 0.0)
    echo.stalled(30.0)  # SIGSTOP for half a minute
    assert echo.behind(30.0) and echo.due(30.0), "one is to go out at once"
    echo.sent(b"b", 30.0)
    assert not echo.due(30.5) and echo.behind(30.5), "sent, not heard: the broker still holds what came before it"
    assert echo.due(32.1), "unheard for the lag: maybe dropped, another one goes"
    echo.sent(b"c", 32.1)
    echo.heard(b"c", 33.0)
    assert echo.dropped == 1, "b never came back: dropped"
    assert echo.behind(33.0), "the look after a drop is behind: leases count afresh from the next"
    assert not echo.behind(33.1)


def test_a_status_unheard_for_longer_than_the_lag_is_a_backlog() -> None:
    echo = echo_at(0.0)
    echo.sent(b"a", 0.0)
    echo.heard(b"a", 0.1)
    assert echo.due(10.0), "every `every` seconds one goes"
    echo.sent(b"b", 10.0)
    assert not echo.behind(11.9)
    assert echo.behind(12.1), "two seconds behind the broker"
    echo.heard(b"b", 15.0)
    assert not echo.behind(15.0) and echo.dropped == 0


def test_off_it_is_never_behind() -> None:
    echo = echo_at(0.0, on=False)  # mam up, or the broker refused the subscription
    echo.sent(b"a", 0.0)
    assert not echo.behind(100.0) and not echo.due(100.0)


def test_too_many_unheard_count_as_dropped() -> None:
    echo = echo_at(0.0)
    for n in range(MAX_UNHEARD + 3):
        echo.sent(b"%d" % n, n * 0.01)
    assert echo.dropped == 3


def test_a_broker_that_never_delivers_it_is_given_up_on_until_one_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    """An ACL without read on the status topic: mosquitto grants the subscription and delivers nothing."""
    echo = echo_at(0.0)
    echo.sent(b"a", 0.0)
    assert echo.behind(GIVE_UP - 1)
    with caplog.at_level(logging.INFO, logger="mam.projector"):
        assert not echo.behind(GIVE_UP + 1), "time is judged as before the echo"
        assert "has not heard its own status back" in caplog.text
        echo.sent(b"b", GIVE_UP + 2)
        echo.heard(b"b", GIVE_UP + 3)
        assert "hears its own status back again" in caplog.text
    assert not echo.gave_up
    echo.sent(b"c", GIVE_UP + 20)
    assert echo.behind(GIVE_UP + 23), "heard again: a backlog counts again"


def test_for_lease_scales_with_the_lease() -> None:
    default = Echo.for_lease(30.0, 1.0)
    assert (default.lag, default.every) == (5.0, 10.0), "the default lease: the projector's heartbeat, 5 s of lag"
    short = Echo.for_lease(3.0, 1.0)
    assert (short.lag, short.every) == (2.0, 1.0), "at least two ticks of lag, one tick between statuses"
