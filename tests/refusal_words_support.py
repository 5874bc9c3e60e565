"""Values a job's numeric options refuse (hypothesis), and what a refusal in mam's words must and must not say
(tests/contract/test_value_words.py, tests/web/test_api_refusals.py, tests/mcp_server/test_strict_arguments.py)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from mam.contract import job_spec

NUMERIC = [
    name
    for name in job_spec.OPTIONS
    if job_spec.option_schema(name).get("anyOf", [{}])[0].get("type") in ("integer", "number")
]
"""The job's numeric options: priority, retries, job_timeout, the budgets, ..."""

LIBRARY_WORDS = (
    "Expected `",
    "Object missing required field",
    "Object contains unknown field",
    "Input should",
    "Value error",
    "validation error",
    "pydantic",
    "errors.pydantic.dev",
    "- at `$",
    "Invalid enum value",
)
"""msgspec's and pydantic's wording: none of it reaches a user."""


def bounds(name: str) -> dict[str, Any]:
    """The option's own schema (its number type and bounds), without the null that means "its default"."""
    branch: dict[str, Any] = job_spec.option_schema(name)["anyOf"][0]
    return branch


def _below(schema: dict[str, Any]) -> st.SearchStrategy[float]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    if low is None:
        return st.nothing()
    top = low if "exclusiveMinimum" in schema else low - 1
    floats = st.floats(
        max_value=low,
        exclude_max="exclusiveMinimum" not in schema,
        allow_nan=False,
        allow_infinity=False,
        min_value=-1e300,
    )
    return st.integers(min_value=-(10**30), max_value=math.floor(top)) | floats


def _above(schema: dict[str, Any]) -> st.SearchStrategy[float]:
    high = schema.get("maximum")
    if high is None:
        return st.nothing()
    floats = st.floats(min_value=high, exclude_min=True, allow_nan=False, allow_infinity=False, max_value=1e300)
    return st.integers(min_value=math.floor(high) + 1, max_value=10**30) | floats


def _not_a_number(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    others: st.SearchStrategy[Any] = (
        st.text(max_size=20)
        | st.booleans()
        | st.lists(st.integers(), max_size=3)
        | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
    )
    if schema["type"] == "integer":
        others = others | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
    return others


def refused_values(name: str) -> st.SearchStrategy[Any]:
    """Values `name` refuses: below or above its range, or not a number of its kind (JSON-representable)."""
    schema = bounds(name)
    return _below(schema) | _above(schema) | _not_a_number(schema)


def refused_option() -> st.SearchStrategy[tuple[str, Any]]:
    return st.sampled_from(NUMERIC).flatmap(lambda name: st.tuples(st.just(name), refused_values(name)))


def drawn(at: int, count: int, strategy: st.SearchStrategy[Any]) -> list[Any]:
    """Up to `count` distinct examples of `strategy`, the same for the same `at` (for a test that sends each
    through a running server, where `@given` cannot wrap the test itself)."""
    found: list[Any] = []

    @seed(at)
    @settings(max_examples=count, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(example=strategy)
    def draw(example: Any) -> None:
        if repr(example) not in map(repr, found):
            found.append(example)

    draw()
    return found


def in_mams_words(message: str, *, names: str) -> None:
    """One line, naming `names` (the field or the flag), none of a library's wording."""
    assert "\n" not in message, message
    assert names in message, (names, message)
    assert not [w for w in LIBRARY_WORDS if w in message], message
