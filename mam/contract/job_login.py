"""A job's login: what a runner hands its job instead of its own broker password.

The contract (docs/security.md, "A job's credentials"; docs/design/runners.md, Runner identity):

- The user name is `job:<job_id>`. No user of a password file can be named so
  (`mam passwd` refuses a `:` in a name), so a job's login never shadows one.
- The password is `<attempt>.<S>`: the attempt it was made for, and S, the
  signature of the runner instance that claimed that attempt (the key its claim
  names, `runner_key`, which the record keeps), base64url without padding
  (86 characters), over `b"mam job login\\n" + workspace + b"\\n" + job_id +
  b"\\n" + attempt`. Nobody else can make it: the key lives in the runner's
  memory only.
- A broker that takes job logins (`mam up` with a password file) lets one in
  only while the record says the job is claimed, running or waiting, on that
  attempt, with that key. So the login expires with the job (or the attempt):
  nothing to revoke, nothing to store.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from cryptography.exceptions import InvalidSignature

from mam.contract.attempts import attempt_of
from mam.contract.identity import RunnerKey
from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord, Status
from mam.contract.signing import public_key_from_b64

USER_PREFIX: Final = "job:"
CONTEXT: Final = b"mam job login\n"
LIVE: Final = frozenset({Status.CLAIMED, Status.RUNNING, Status.WAITING})
"""The statuses in which a job's login is taken: its runner holds it."""
_TOKEN: Final = re.compile(r"([1-9][0-9]{0,5})\.([A-Za-z0-9_-]{86})")


def user_of(job_id: str) -> str:
    """The user name of `job_id`'s login."""
    return USER_PREFIX + job_id


def is_job_user(user: str | None) -> bool:
    """Whether `user` is a job's login (valid or not): such a name is never a password file's user."""
    return user is not None and user.startswith(USER_PREFIX)


def job_of(user: str | None) -> str | None:
    """The job a login's user name names, or None if it names none (not `job:`, or no job id after it)."""
    if not is_job_user(user):
        return None
    assert user is not None
    job_id = user.removeprefix(USER_PREFIX)
    return job_id if is_job_id(job_id) else None


def is_token(password: str | None) -> bool:
    """Whether `password` has a token's shape (checked before anything is read for it)."""
    return password is not None and _TOKEN.fullmatch(password) is not None


def _message(workspace_id: str, job_id: str, attempt: int) -> bytes:
    return CONTEXT + f"{workspace_id}\n{job_id}\n{attempt}".encode()


def mint(key: RunnerKey, workspace_id: str, job_id: str, attempt: int) -> str:
    """The password of `job_id`'s login for `attempt`, signed with the runner instance's key."""
    signature = key.key.sign(_message(workspace_id, job_id, attempt))
    return f"{attempt}." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def refusal(password: str, *, workspace_id: str, record: JobRecord) -> str | None:
    """Why `password` is not the login of `record`'s job now, or None if it is."""
    job_id = record.job_id
    if record.status not in LIVE:
        return f"job {job_id} is {record.status.value}: a job's login ends with the job"
    if not isinstance(record.runner_key, str):
        return f"job {job_id}'s claim names no runner key, so no login can be made for it"
    found = _TOKEN.fullmatch(password)
    if found is None:
        return "the password is not a job login token (<attempt>.<signature>)"
    attempt = int(found.group(1))
    if attempt != attempt_of(record):
        return f"the token is for attempt {attempt}; job {job_id} is on attempt {attempt_of(record)}"
    try:
        signature = base64.urlsafe_b64decode(found.group(2) + "==")
        public_key_from_b64(record.runner_key).verify(signature, _message(workspace_id, job_id, attempt))
    except (binascii.Error, ValueError, InvalidSignature):
        return f"the token does not verify with the key of job {job_id}'s claim"
    return None


__all__ = ["CONTEXT", "LIVE", "USER_PREFIX", "is_job_user", "is_token", "job_of", "mint", "refusal", "user_of"]
