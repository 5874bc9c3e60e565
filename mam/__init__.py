"""mam: an MQTT-native, event-sourced job registry for multi-agent coding work."""

from mam.errors import MamError
from mam.events import AnyEvent, decode_event
from mam.record import JobRecord, Status
from mam.topics import Topics
from mam.workspace import Workspace, logs_dir, registry_dir, resolve

__version__ = "0.1.0"

__all__ = [
    "AnyEvent",
    "JobRecord",
    "MamError",
    "Status",
    "Topics",
    "Workspace",
    "__version__",
    "decode_event",
    "logs_dir",
    "registry_dir",
    "resolve",
]
