"""The tests' fault hook (`projector/faults.py`): `MAM_TEST_FAIL` is read once, into a `Faults` the projector is
built with; the fold of a message (`projection.py`) reads no environment and has no test branch."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from mam.projector import projection
from mam.projector.faults import NO_FAULTS, TEST_HOOK, Faults, holding


@pytest.mark.parametrize(
    ("value", "faults"),
    [
        ("fold:poison", Faults(fold=b"poison")),
        ("commit:x y", Faults(commit=b"x y")),
        ("ack:a:b", Faults(ack=b"a:b")),
        ("fold:", NO_FAULTS),
        ("other:poison", NO_FAULTS),
        ("", NO_FAULTS),
    ],
)
def test_the_hook_is_read_into_faults(value: str, faults: Faults) -> None:
    assert Faults.from_env({TEST_HOOK: value}) == faults


def test_no_hook_is_no_fault() -> None:
    assert Faults.from_env({}) == NO_FAULTS
    assert holding(NO_FAULTS.fold, [SimpleNamespace(payload=b"anything")]) is None


def test_the_first_message_holding_the_text_is_the_one_made_to_fail() -> None:
    batch = [SimpleNamespace(payload=b"fine"), SimpleNamespace(payload=b"a poison"), SimpleNamespace(payload=b"poison")]
    assert holding(b"poison", batch) is batch[1]
    assert holding(b"poison", [SimpleNamespace(payload=None)]) is None


def test_the_fold_of_a_message_reads_no_environment_and_no_hook() -> None:
    source = inspect.getsource(projection)
    assert TEST_HOOK not in source and "environ" not in source and "getenv" not in source
