"""Reading one setting of a workspace's `.mam/config.json`.

Several parts keep a setting there (`limits`, `unsigned_runners`, `refusal_log`, ...), each parsed and
checked by its own module; this is the part they share: find the file, read it as JSON, take one key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from mam.contract.errors import UsageError

CONFIG_NAME: Final = "config.json"


def config_path(workspace_root: Path) -> Path:
    return workspace_root / ".mam" / CONFIG_NAME


def config_entry(workspace_root: Path, key: str) -> tuple[Path, object | None]:
    """The file's path and its value at `key`: None when the file, or the key, is absent (or the file holds
    no object). A file that cannot be read as JSON is a one-line `UsageError` naming it."""
    path = config_path(workspace_root)
    if not path.is_file():
        return path, None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    return path, data.get(key) if isinstance(data, dict) else None


__all__ = ["CONFIG_NAME", "config_entry", "config_path"]
