"""A refused job option in mam's words (`mam.contract.value_words`), in every front end's form: the flag on the
command line, the field elsewhere, the range and its unit, where to read more; never msgspec's wording. The
words are found from the value and the option's schema, so they are checked against msgspec's own verdict on
every kind of value (hypothesis): where msgspec refuses, the words say why; where it takes it, they find nothing."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusal_words_support import NUMERIC, bounds, in_mams_words, refused_option

from mam.contract import job_spec
from mam.contract.errors import UsageError
from mam.contract.value_words import DOCS, fault, missing, number, unknown

ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=70) | st.dictionaries(st.text(max_size=70), inner, max_size=70),
    max_leaves=80,
)
"""Any value a body or a tool call could carry, long and deep enough to cross every bound."""


def _msgspec_takes(name: str, value: object) -> bool:
    try:
        msgspec.convert({"prompt": "p", "agent": "a", name: value}, type=job_spec.JobSpec)
    except msgspec.ValidationError:
        return False
    return True


@settings(max_examples=600)
@given(name=st.sampled_from(list(job_spec.OPTIONS)), value=ANY_JSON)
def test_the_words_find_a_fault_exactly_where_msgspec_refuses(name: str, value: Any) -> None:
    schema = job_spec.option_schema(name)
    if value is None:
        return  # null: the option left out, its default
    found = fault(value, schema, job_spec.UNITS.get(name, ""))
    assert (found is None) == _msgspec_takes(name, value), (name, value, found)


@settings(max_examples=400)
@given(option=refused_option(), front=st.sampled_from(["cli", "python", "api", "mcp"]))
def test_an_out_of_range_or_wrong_type_number_is_refused_in_mams_words_naming_it(
    option: tuple[str, Any],
    front: Any,
) -> None:
    name, value = option
    with pytest.raises(UsageError) as refused:
        job_spec.convert({"prompt": "p", "agent": "a", name: value}, front=front)
    said = str(refused.value)
    flag = job_spec.OPTIONS[name].flag
    in_mams_words(said, names=f"{flag} " if front == "cli" and flag else f"{name}: ")
    assert said.endswith(f"; {DOCS[front]})"), said  # where to read more
    schema = bounds(name)
    if "maximum" in schema and isinstance(value, int | float) and not isinstance(value, bool):
        assert "is out of range: give " in said or "is not a whole number: give " in said, said
    unit = job_spec.UNITS.get(name)
    if unit and "give " in said:
        assert f" {unit} (" in said, said  # the range's unit


@pytest.mark.fast
def test_priority_out_of_range_reads_the_same_in_every_front_but_for_the_flag_and_the_doc() -> None:
    said = {}
    for front in ("cli", "python", "api", "mcp"):
        with pytest.raises(UsageError) as refused:
            job_spec.convert({"prompt": "p", "agent": "a", "priority": 99999999}, front=front)  # type: ignore[arg-type]
        said[front] = str(refused.value)
    assert said["cli"] == "--priority 99999999 is out of range: give -1000 to 1000 (higher runs first; docs/cli.md)"
    assert said["api"] == "priority: 99999999 is out of range: give -1000 to 1000 (higher runs first; docs/api.md)"
    assert said["mcp"] == said["api"].replace("docs/api.md", "docs/mcp.md")
    assert said["python"] == said["api"].replace("docs/api.md", "docs/cli.md#python-api")


@pytest.mark.fast
def test_every_missing_option_is_named_at_once() -> None:
    with pytest.raises(UsageError) as both:
        job_spec.decode(b"{}")
    assert str(both.value) == "missing required fields: prompt, agent (see docs/api.md)"
    with pytest.raises(UsageError) as one:
        job_spec.decode(b'{"agent": "shell", "prompt": null}')
    assert str(one.value) == "missing required field: prompt (see docs/api.md)"
    assert (
        missing(["prompt", "agent"], "cli", kind="option", flags={"prompt": "--prompt", "agent": "--agent"})
        == "missing required options: --prompt, --agent (see docs/cli.md)"
    )


@pytest.mark.fast
def test_an_unknown_name_gets_the_nearest_known_one_and_the_list() -> None:
    known = job_spec.names("mcp")
    said = unknown(["job_timout"], known, kind="argument", of="submit_job")
    assert said.startswith("unknown argument 'job_timout' for submit_job; did you mean 'job_timeout'? known: prompt, ")
    assert unknown(["bogus"], known, kind="field").startswith("unknown field 'bogus'; known: prompt, agent, ")
    both = unknown(["bogus", "priorty"], known, kind="field")
    assert both.startswith("unknown fields 'bogus', 'priorty' (did you mean 'priority'?); known: "), both
    with pytest.raises(UsageError) as refused:
        job_spec.decode(b'{"agent": "a", "prompt": "p", "job_timout": 2}')
    assert "unknown field 'job_timout'; did you mean 'job_timeout'?" in str(refused.value)


@pytest.mark.fast
@pytest.mark.parametrize("name", NUMERIC)
def test_each_numeric_option_says_its_range_with_the_bounds_of_its_schema(name: str) -> None:
    schema = bounds(name)
    too_big = schema["maximum"] * 2 + 1
    with pytest.raises(UsageError) as refused:
        job_spec.convert({"prompt": "p", "agent": "a", name: too_big}, front="api")
    said = str(refused.value)
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    assert f"is out of range: give {'more than ' if 'exclusiveMinimum' in schema else ''}{number(low)}" in said, said
    assert number(schema["maximum"]) in said, said
