"""The projector: the only writer of a workspace's registry and audit log."""

from mam.projector.service import Projector

__all__ = ["Projector"]
