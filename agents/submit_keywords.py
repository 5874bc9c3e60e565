"""`Publisher.submit`'s keyword form: `submit(prompt=..., agent=..., ...)`, kept working beside `submit(JobSpec(...))`.

`SubmitKeywords` types the keywords for mypy (`**options: Unpack[SubmitKeywords]`); `spec_of` makes them the
`JobSpec` the other form takes, so both forms validate and publish the same way. The names and meanings are
`JobSpec`'s (`mam.contract.job_spec`, whose `OPTIONS` says what each does);
`tests/agents/test_publisher_face.py` holds the two lists to each other.
"""

import warnings
from typing import Any, Required

from mam.contract import job_spec
from mam.contract.errors import UsageError
from mam.contract.job_options import OptionKeywords


class SubmitKeywords(OptionKeywords, total=False):
    """`JobSpec`'s fields as keywords: `prompt` and `agent` required, the rest optional (None: its default); the
    job options' own come from `OptionKeywords`. `timeout` is `job_timeout`'s deprecated old name (a
    DeprecationWarning)."""

    prompt: Required[str]
    agent: Required[str]
    job_id: str | None
    agent_session: str | None
    role: str | None
    labels: dict[str, str] | None
    parent: str | None
    no_parent: bool
    job_timeout: float | None
    timeout: float | None
    resume: str | None


def run_limit(job_timeout: float | None, timeout: float | None) -> float | None:
    """The run limit `submit` was given: `job_timeout`, or `timeout`, its old name (a DeprecationWarning)."""
    if timeout is None:
        return job_timeout
    if job_timeout is not None and job_timeout != timeout:
        raise UsageError(f"timeout={timeout:g} is the old name of job_timeout={job_timeout:g}: give job_timeout only")
    warnings.warn(
        "Publisher.submit(timeout=...) is the job's run limit, now named job_timeout", DeprecationWarning, stacklevel=4
    )
    return timeout


def spec_of(options: dict[str, Any]) -> job_spec.JobSpec:
    """The keywords as a `JobSpec`; `UsageError` naming a keyword unknown, missing or out of bounds."""
    given = dict(options)
    timeout = given.pop("timeout", None)
    given["job_timeout"] = run_limit(given.get("job_timeout"), timeout)
    given["no_parent"] = given.get("no_parent") or None
    return job_spec.convert(given)


__all__ = ["SubmitKeywords", "run_limit", "spec_of"]
