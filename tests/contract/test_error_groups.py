"""`first_of`: the exception an `except*` handler reports, however deep a task group nested it (the projector's
one-line OSError and lost-broker messages read `.strerror`/`.filename` from it)."""

from __future__ import annotations

import pytest

from mam.contract.errors import first_of

pytestmark = pytest.mark.fast


def test_first_of_a_flat_group_is_its_first_exception() -> None:
    first = OSError(28, "No space left on device", "/w/.mam")
    assert first_of(ExceptionGroup("g", [first, OSError("second")])) is first


def test_first_of_reaches_through_groups_nested_by_task_groups() -> None:
    inner = OSError(24, "Too many open files", "/w/.mam/jobs")
    try:
        raise ExceptionGroup("outer", [ExceptionGroup("inner", [inner]), ValueError("other")])
    except* OSError as group:
        assert isinstance(group.exceptions[0], ExceptionGroup)  # what `group.exceptions[0]` used to hand on
        found = first_of(group)
    except* ValueError:
        pass
    assert found is inner and found.strerror == "Too many open files"
