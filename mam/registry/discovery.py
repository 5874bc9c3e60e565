"""What the workspace's running projector says about itself in its lock file.

Only reading commands (`mam workspace`) look here; writers never open a file
under the registry or log dirs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mam.registry.nofollow import read_beneath
from mam.registry.runtime import pid_alive

LOCK_NAME = ".projector.lock"


def projector_info(registry_dir: Path) -> dict[str, Any] | None:
    """The live projector's lock info, or `None` if none holds the workspace (a lock that
    is a link is no projector's: it is not followed)."""
    try:
        info = json.loads(read_beneath(registry_dir, LOCK_NAME) or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not pid_alive(info.get("pid")):
        return None
    return info
