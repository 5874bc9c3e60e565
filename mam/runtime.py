"""`mam.runtime`, as the README's Python API imported it before mam/ was grouped: the same module object
as `mam.registry.runtime` (so `from mam.runtime import choose_broker` keeps working, and patching either
name patches both)."""

import sys

from mam.registry import runtime

sys.modules[__name__] = runtime
