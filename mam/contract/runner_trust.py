"""Whether the workspace takes claims that name no runner key: `.mam/config.json` `"unsigned_runners"`.

By default only a signed claim starts a job: a `claimed` must name the claiming runner's
public key (`runner_key`) and carry its signature (`mam.contract.identity`), and every later
event of the job must be signed by that key (`projector/identity.py`). A workspace whose
runners cannot sign (a mam-agent older than runner keys, a client by hand that will not)
says `{"unsigned_runners": true}`: its claims without a key are taken again, and such a job is
not protected (anyone who may publish its events speaks for it; docs/security.md). No I/O but
reading the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from mam.contract.errors import UsageError
from mam.contract.workspace_config import config_entry

KEY: Final = "unsigned_runners"
OLD_SIGNATURES: Final = "old_runner_signatures"
"""Whether events signed the old way (over the job alone, not the workspace) are taken: true (the default
during the transition, docs/security.md), false refuses them."""


def _flag(workspace_root: Path, key: str, absent: bool) -> bool:
    """A true-or-false key of the workspace's config (`absent` when the file or the key is not there); any
    other value is a one-line error naming it."""
    path, value = config_entry(workspace_root, key)
    if value is None:
        return absent
    if not isinstance(value, bool):
        raise UsageError(f"{path}: {key}: {value!r} is not true or false")
    return value


def load(workspace_root: Path) -> bool:
    """The workspace's `unsigned_runners` (False when absent)."""
    return _flag(workspace_root, KEY, False)


def load_old_signatures(workspace_root: Path) -> bool:
    """The workspace's `old_runner_signatures` (True when absent)."""
    return _flag(workspace_root, OLD_SIGNATURES, True)


__all__ = ["KEY", "OLD_SIGNATURES", "load", "load_old_signatures"]
