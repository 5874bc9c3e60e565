"""A plain agent command that exits 0 after its model API refused it: aider's API errors fail the job.

aider 0.86.2 run with `--message-file` returns exit code 0 whatever became of the message: aider/main.py
returns None after `coder.run(with_message=...)`. When a model call fails with an error it does not retry
(litellm's AuthenticationError, BadRequestError, NotFoundError: `retry=False` in aider/exceptions.py) or it
has retried too long (RETRY_TIMEOUT), aider/coders/base_coder.py (`send_message`, `check_and_open_urls`) prints
litellm's exception (`litellm.AuthenticationError: AuthenticationError: OpenAIException - ...`), its own
explanation ("The API provider is not able to authenticate you. Check your API key."), and gives up on the
message. Its options (aider.chat/docs/config/options.html) have none that makes it exit non-zero then: a known
bug, Aider-AI/aider#5552 (open), whose fix (#5553: exit 1 after such an error) is not merged.

So for aider the runner reads the end of its stdout: when the last line there that begins with a litellm
exception is not followed by aider's "Retrying in" line, the run gave up, and the job fails with that error and
aider's explanation on one line (aider wraps its output at 80 columns: the lines are joined with spaces).
The built-in `aider` profile reads all of aider's output through its format (`formats/aider.py`, the same
reading line by line); this is for an aider run as a plain command (a workspace's profile or `--command`
without `--format aider-text`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from mam.agents.formats.aider import EXCEPTION, RETRYING
from mam.agents.formats.verdict import one_line_plain

PROGRAMS: Final = frozenset({"aider"})
"""The commands read this way: those known to exit 0 after giving up on their message."""


def gave_up(argv: Sequence[str], stdout_tail: str) -> str | None:
    """Why a run that exited 0 failed (one line without escape codes), or None: it did not give up, or mam does
    not read its command's output. `stdout_tail`: the end of the job's stdout."""
    if not argv or os.path.basename(argv[0]) not in PROGRAMS:
        return None
    text = "\n".join(one_line_plain(line) for line in stdout_tail.splitlines())  # escape codes out
    found = list(EXCEPTION.finditer(text))
    if not found:
        return None
    rest = text[found[-1].start() :]
    if RETRYING in rest:
        return None  # aider retries this call; it gave up only if a later call failed for good
    return " ".join(rest.split())


__all__ = ["gave_up"]
