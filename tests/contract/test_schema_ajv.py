"""The published event schema compiles under Ajv, the validator most JavaScript clients use.

Ajv's default options are strict: a keyword or format it does not know stops
the compile (https://ajv.js.org/strict-mode.html). msgspec's `discriminator` and
the old `x-mam-derived` did; `mam.contract.schema` leaves both out. Node and an npm
install of ajv@8 and ajv-formats@3 are needed: `.ci/run` installs them into
/opt/mam-ci/ajv (or `MAM_AJV_DIR`); without them the test is skipped, except
under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mam.contract.events import EVENT_TYPES
from mam.contract.schema import event_schema, render

from support import TESTS

HERE = TESTS
CHECKED_IN = HERE.parent / "docs" / "events.schema.json"
AJV_DIR = Path(os.environ.get("MAM_AJV_DIR", "/opt/mam-ci/ajv"))


def node_with_ajv() -> str:
    node = shutil.which("node")
    modules = AJV_DIR / "node_modules"
    if node is None or not (modules / "ajv").is_dir() or not (modules / "ajv-formats").is_dir():
        message = f"node with ajv and ajv-formats under {modules} is needed (npm install --prefix {AJV_DIR} ajv@8 ajv-formats@3)"
        if os.environ.get("CI"):
            pytest.fail(message + ": CI must install them (.ci/run)")
        pytest.skip(message)
    return node


def test_every_schema_mam_publishes_compiles_under_ajv_strict_defaults(tmp_path: Path) -> None:
    node = node_with_ajv()
    files = [CHECKED_IN]
    for name in EVENT_TYPES:
        one = tmp_path / f"{name}.schema.json"
        one.write_text(render(event_schema(name)), encoding="utf-8")
        files.append(one)
    result = subprocess.run(
        [node, str(HERE / "ajv_compile.cjs"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": str(AJV_DIR / "node_modules")},
    )
    assert result.returncode == 0, result.stderr
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert [Path(v["path"]).name for v in verdicts] == [f.name for f in files]
    assert all(v["version"].startswith("8.") for v in verdicts), verdicts[0]["version"]
    failed = {
        v["path"]: (v["default"], v["formats"])
        for v in verdicts
        if (v["default"], v["formats"]) != ("compiled", "compiled")
    }
    assert not failed, failed


def test_ajv_refuses_what_mam_used_to_publish(tmp_path: Path) -> None:
    """The check can fail: msgspec's own output (with its discriminator) does not compile."""
    import msgspec

    from mam.contract.events import AnyEvent

    node = node_with_ajv()
    (root,), defs = msgspec.json.schema_components([AnyEvent])
    raw = tmp_path / "raw.schema.json"
    raw.write_text(json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": defs}))
    result = subprocess.run(
        [node, str(HERE / "ajv_compile.cjs"), str(raw)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": str(AJV_DIR / "node_modules")},
    )
    (verdict,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert "discriminator" in verdict["default"], verdict
