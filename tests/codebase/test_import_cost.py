"""Importing a module costs what it imports: no package `__init__` loads the service around it.

Before, `import mam.projector.dirs` (standard library only) ran `mam/projector/__init__.py`, which
imported the whole projector: 101 mam modules plus paho and aiomqtt; `mam.broker.topic_match` loaded
amqtt and YAML (issue 44). The packages' `__init__`s now re-export lazily (PEP 562 `__getattr__`), so
`from mam.projector import Projector` still works and costs the projector only then.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support import CHECKOUT

HEAVY = {"paho", "aiomqtt", "amqtt", "yaml", "cryptography", "ssl"}
"""An MQTT client, the embedded broker, YAML, TLS and cryptography: what a small module must not drag in."""

SIGNING = {"mam.contract.identity", "mam.contract.job_login", "mam.contract.offers", "mam.contract.signing"}
"""Contract modules whose job is keys and signatures: cryptography is theirs to load, nothing else heavy."""

CONTRACT = sorted(
    f"mam.contract.{p.stem}" for p in (CHECKOUT / "mam" / "contract").glob("*.py") if p.stem != "__init__"
)


def loaded_by(module: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after importing `module` alone."""
    code = f"import sys, importlib; importlib.import_module({module!r}); print(__import__('json').dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return {name.split(".")[0] for name in json.loads(done.stdout)}


@pytest.mark.parametrize(
    "module",
    ["mam.projector.dirs", "mam.broker.topic_match", "mam.agents.names", *[m for m in CONTRACT if m not in SIGNING]],
)
def test_a_small_module_loads_no_mqtt_broker_yaml_tls_or_cryptography(module: str) -> None:
    assert loaded_by(module) & HEAVY == set()


@pytest.mark.parametrize("module", sorted(SIGNING))
def test_the_signing_modules_load_cryptography_and_nothing_else_heavy(module: str) -> None:
    assert loaded_by(module) & HEAVY <= {"cryptography"}


def test_the_packages_still_export_what_they_did() -> None:
    code = (
        "from mam.projector import Projector; from mam.broker import EmbeddedBroker; "
        "from mam.agents import Publisher, new_event_id, new_job_id; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
