"""`mam.workspace`, as the README's Python API imported it before mam/ was grouped: the same module object
as `mam.contract.workspace` (so `from mam.workspace import resolve` keeps working, and patching either
name patches both)."""

import sys

from mam.contract import workspace

sys.modules[__name__] = workspace
