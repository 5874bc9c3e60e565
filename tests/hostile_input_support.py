"""The corpus of hostile JSON inputs (tests/corpus) and how a case is loaded."""

from __future__ import annotations

import base64
import json
from pathlib import Path

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.json"))


def load_case(path: Path) -> tuple[str, bytes, str, bool]:
    case = json.loads(path.read_text(encoding="utf-8"))
    if "payload_b64" in case:
        payload = base64.b64decode(case["payload_b64"])
    elif "generate" in case:
        payload = generate(case["generate"])
    else:
        payload = case["payload"].encode()
    return case["job"], payload, case["reason"], bool(case.get("retain"))


def generate(spec: dict) -> bytes:
    if spec["kind"] == "huge":
        filler = b"x" * spec["bytes"]
        return b'{"type":"submitted","agent":"a","prompt":"' + filler + b'"}'
    if spec["kind"] == "nested-array":
        return b"[" * spec["depth"] + b"]" * spec["depth"]
    if spec["kind"] == "nested-unknown":  # a field this release ignores, msgspec skips it by recursion
        depth = spec["depth"]
        opened, inner, closed = (b"[", b"", b"]") if spec["of"] == "arrays" else (b'{"k":', b"1", b"}")
        return b'{"type":"submitted","prompt":"p","agent":"a","junk":' + opened * depth + inner + closed * depth + b"}"
    if spec["kind"] == "nested-labels":
        depth = spec["depth"]
        return b'{"type":"submitted","prompt":"p","agent":"a","labels":' + b'{"k":' * depth + b"1" + b"}" * depth + b"}"
    raise ValueError(spec)
