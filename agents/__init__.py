"""The writers: the async publisher API and `mam submit` / `mam cancel`."""

from mam.agents.publisher import Publisher, new_event_id, new_job_id

__all__ = ["Publisher", "new_event_id", "new_job_id"]
