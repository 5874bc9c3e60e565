"""Jobs sort by duration the same with and without the query index: the index's SQL (`julianday`
difference) and the registry scan's `sort_key` give every pair of millisecond times the same whole
milliseconds, so equal durations tie in both and fall to the same tie-break. (With the raw float
difference, two equal durations compared unequal in SQLite now and then: the full run caught the
dashboard's `sort=duration` page differing without the index.)"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from signing_support import record

from mam.contract.record import Status
from mam.registry.ordering import sort_key
from mam.web.job_list import _ORDER  # the SQL the index orders by

pytestmark = pytest.mark.fast

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(ms: int) -> str:
    return (EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@given(start=st.integers(0, 10**11), length=st.integers(0, 10**9))
def test_sql_and_scan_give_the_same_whole_milliseconds(start: int, length: int) -> None:
    started, finished = stamp(start), stamp(start + length)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE jobs (started_at TEXT, finished_at TEXT)")
    conn.execute("INSERT INTO jobs VALUES (?, ?)", (started, finished))
    (in_sql,) = conn.execute(f"SELECT {_ORDER['duration']} FROM jobs j", (stamp(0),)).fetchone()
    done = record(status=Status.SUCCEEDED, started_at=started, finished_at=finished)
    assert in_sql == sort_key(done, "duration", EPOCH) == float(length)


def test_a_job_not_started_sorts_first_in_both() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE jobs (started_at TEXT, finished_at TEXT)")
    conn.execute("INSERT INTO jobs VALUES (NULL, NULL)")
    (in_sql,) = conn.execute(f"SELECT {_ORDER['duration']} FROM jobs j", (stamp(0),)).fetchone()
    assert in_sql == sort_key(record(), "duration", EPOCH) == -1
