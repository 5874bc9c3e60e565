"""The projector: the only writer of a workspace's registry and audit log."""

from typing import TYPE_CHECKING

from mam import lazy_exports

if TYPE_CHECKING:
    from mam.projector.service import Projector
    from mam.projector.settings import ProjectorSettings


__getattr__ = lazy_exports(
    __name__, {"Projector": "mam.projector.service", "ProjectorSettings": "mam.projector.settings"}
)
"""`from mam.projector import Projector, ProjectorSettings` imports `mam.projector.service` (or `settings`) then;
importing another module of this package (`mam.projector.dirs`, say) loads only what that module imports."""


__all__ = ["Projector", "ProjectorSettings"]
