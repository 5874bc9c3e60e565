"""A job's `parent_close` policy: what becomes of it when its parent ends while it has not.

Temporal's ParentClosePolicy is the model, an option of the child (set by whoever starts it, for that
child): TERMINATE (its default), REQUEST_CANCEL, ABANDON. mam has one way to stop a job, a cancel request
its runner carries out (SIGTERM, then SIGKILL after its grace: a terminate that still records what the
agent used), so two values:

- `cancel` (the default; absent from the record): when its parent ends, however (succeeded, failed,
  cancelled, timed_out, lost), the projector asks the job, and the jobs under it, to cancel, in the batch
  that ends the parent (`mam.contract.cascade`). A child left running when its parent stops (the parent hit
  `--max-turns` or its budget, its runner crashed) has no one left to wait for its result: without this it
  runs on until its runner's idle timeout.
- `abandon`: it runs on and ends by itself (fire and forget: a job meant to outlive the one that started
  it), and so do the jobs under it, each as its own policy says when it ends.

A parent that is retried (`retrying`) has not ended: its children stay until its last attempt ends.
`mam cancel --tree` reaches every unfinished job under the job it names, whatever their policies.
Pure helpers over the event and the record (no I/O).
"""

from __future__ import annotations

from typing import Final

from mam.contract.record import JobRecord

CANCEL: Final = "cancel"
ABANDON: Final = "abandon"
VALUES: Final = (CANCEL, ABANDON)


def policy(record: JobRecord) -> str:
    """The job's policy: the one it was given, else `cancel`."""
    return ABANDON if record.parent_close == ABANDON else CANCEL


def abandons(record: JobRecord | None) -> bool:
    return record is not None and policy(record) == ABANDON


__all__ = ["ABANDON", "CANCEL", "VALUES", "abandons", "policy"]
