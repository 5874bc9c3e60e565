"""A job option is declared once (issue 44, part 2): `mam.contract.job_options.JobOptions` and its `ABOUT` entry;
the event, the record, the job spec, `Publisher.submit`'s keywords, the schemas and `mam submit`'s flags follow
from them, and the code names an option only where it acts on it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec
import pytest
from msgspec import UNSET, UnsetType

from mam.contract import events as ev
from mam.contract import job_options, job_spec
from mam.contract.job_options import ABOUT, JobOptions, OptionKeywords
from mam.contract.record import JobRecord

pytestmark = pytest.mark.fast

CHECKOUT = Path(__file__).resolve().parents[2]
SOURCE = ("mam", "agents", "projector", "broker", "web", "mcp_server")
MOST_FILES = 4
"""The source files that may name one option: its declaration, the event's and the record's field, the code
that acts on it."""


def naming(word: str) -> list[str]:
    """The source files that name `word` (as `grep -rlw WORD --include=*.py` finds them)."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])")
    return sorted(
        str(path.relative_to(CHECKOUT))
        for top in SOURCE
        for path in (CHECKOUT / top).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    )


@pytest.mark.parametrize("option", ["max_turns", "priority"])
def test_an_option_is_named_in_few_source_files(option: str) -> None:
    files = naming(option)
    assert "mam/contract/job_options.py" in files
    assert len(files) <= MOST_FILES, files


def test_the_event_the_record_and_the_spec_carry_every_option() -> None:
    fields = set(JobOptions.__struct_fields__)
    for struct in (ev.Submitted, JobRecord, job_spec.JobSpec):
        assert fields <= set(struct.__struct_fields__), (struct.__name__, fields - set(struct.__struct_fields__))
    assert list(ABOUT) == list(JobOptions.__struct_fields__)
    assert list(get_type_hints(OptionKeywords)) == list(JobOptions.__struct_fields__)
    assert set(job_spec.OPTIONS) == set(job_spec.JobSpec.__struct_fields__)


def test_the_event_takes_each_option_as_declared_and_leaves_it_out_unless_given() -> None:
    declared = get_type_hints(JobOptions, include_extras=True)
    event = get_type_hints(ev.Submitted, include_extras=True)
    for name in JobOptions.__struct_fields__:
        assert event[name] == declared[name], name
    defaults = {f.name: f.default for f in msgspec.structs.fields(ev.Submitted)}
    record_defaults = {f.name: f.default for f in msgspec.structs.fields(JobRecord)}
    for name in JobOptions.__struct_fields__:
        assert defaults[name] is UNSET and record_defaults[name] is UNSET, name


def _loose(kind: Any) -> Any:
    """The type a record keeps a value of `kind` as: no bounds, a `Literal` of words as `str`, no None."""
    if get_origin(kind) is Annotated:
        return _loose(get_args(kind)[0])
    if get_origin(kind) is Literal:
        return str
    if get_origin(kind) is Union or type(kind).__name__ == "UnionType":
        kept = [_loose(arg) for arg in get_args(kind) if arg is not type(None)]
        return Union[tuple(kept)] if len(kept) > 1 else kept[0]  # noqa: UP007 - built from a list
    if get_origin(kind) in (list, dict):
        return get_origin(kind)[tuple(_loose(arg) for arg in get_args(kind))]
    return kind


def test_the_record_keeps_each_option_as_the_loose_form_of_its_type() -> None:
    """Loose, so a record written under other bounds still decodes; the same values, so the copy is exact."""
    declared = get_type_hints(JobOptions, include_extras=True)
    record = get_type_hints(JobRecord, include_extras=True)
    for name in JobOptions.__struct_fields__:
        assert _loose(record[name]) == _loose(declared[name]), name
        assert UnsetType in get_args(record[name]), name


def test_the_copies_go_over_every_option() -> None:
    """What a submit gives reaches the record, and `mam retry` carries each option it should."""
    from mam.agents.retrying import resubmission
    from mam.contract.fold import Context, apply

    given = {
        "requeue": False,
        "permissions": "edit",
        "retries": 2,
        "retry_on": ["lost"],
        "backoff": 2.0,
        "after": ["a"],
        "model": "opus",
        "max_turns": 3,
        "budget_tokens": 10,
        "budget_usd": 1.5,
        "tree_budget_tokens": 20,
        "tree_budget_usd": 2.5,
        "require": {"gpu": "a100"},
        "priority": 5,
        "parent_close": "abandon",
    }
    assert set(given) == set(JobOptions.__struct_fields__)  # a new option: give it here too
    spec = job_spec.convert({"prompt": "p", "agent": "a", **given})
    event = job_spec.submitted(spec, parent=None, git=None)
    record = apply(None, event, Context("j", "w", "e", "t"))
    assert isinstance(record, JobRecord)
    assert job_options.given(record) == given
    carried = {name for name, about in ABOUT.items() if about.retried}
    assert job_options.given(resubmission(record, None)) == {n: v for n, v in given.items() if n in carried}
