"""What the workspace's running projector says about itself in its lock file.

Only reading commands (`mam workspace`) look here; writers never open a file
under the registry or log dirs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOCK_NAME = ".projector.lock"


def projector_info(registry_dir: Path) -> dict[str, Any] | None:
    """The live projector's lock info, or `None` if none holds the workspace."""
    try:
        info = json.loads((registry_dir / LOCK_NAME).read_bytes() or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not _alive(info.get("pid")):
        return None
    return info


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
