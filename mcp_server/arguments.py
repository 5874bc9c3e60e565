"""Every tool's arguments, checked the same way: only the known ones, and a refusal in mam's words.

The SDK builds each tool's input schema and argument model from its signature (pydantic, `func_metadata`), and
that model ignores an argument it does not know: `submit_job` with `job_timout: 2` ran with no run limit. Here,
once for every tool (`MamServer` calls these), the schema says `additionalProperties: false`, a call with an
unknown argument is refused naming the known ones (and the nearest), and pydantic's refusal of a value becomes
mam's words (`mam.contract.value_words`), from the value sent and the argument's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.types import Tool
from pydantic import ValidationError

from mam.contract.value_words import Field, missing, refusal, unknown

UNITS = {"timeout": "seconds", "tail_bytes": "bytes", "max_bytes": "bytes"}
"""What the numbers of the tools' own arguments count (the job options' units are the job spec's)."""


def strict(tool: Tool) -> Tool:
    """`tool` with an input schema that allows no argument it does not name."""
    return tool.model_copy(update={"input_schema": {**tool.input_schema, "additionalProperties": False}})


def unknown_arguments(tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """`unknown argument 'job_timout' for submit_job; did you mean 'job_timeout'? known: ...`, or None."""
    known = list(schema.get("properties", {}))
    extra = [name for name in arguments if name not in known]
    return unknown(extra, known, kind="argument", of=tool) if extra else None


def argument_errors(tool: str, exc: ValidationError, arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """Each argument pydantic refused, in one line: all the missing ones at once, each bad value with its range
    and what the argument is for (`timeout: 5000 is out of range: give more than 0 and at most 86400 (seconds to
    wait at most; docs/mcp.md)`)."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    left_out: list[str] = []
    said: list[str] = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else ""
        if error["type"] == "missing":
            left_out.append(name)
        elif error["type"] == "value_error":  # a check of mam's own (the job spec's): its words already
            said.append(" ".join(str(error["msg"]).removeprefix("Value error, ").split()))
        elif name in properties:
            value = error["input"] if len(error["loc"]) == 1 else arguments.get(name)
            prop = properties[name]
            line = refusal(name, value, prop, "mcp", Field(str(prop.get("description", "")), unit=UNITS.get(name, "")))
            if line not in said:
                said.append(line)
        else:
            said.append(f"the arguments do not have the form {tool} takes (see docs/mcp.md)")
    if left_out:
        said.insert(0, missing(left_out, "mcp", kind="argument", of=tool))
    return "; ".join(dict.fromkeys(said))


__all__ = ["argument_errors", "strict", "unknown_arguments"]
