"""A job's branch across machines: the runner fetches the submit's commit and pushes the job's branch;
the workspace fetches that branch back (`mam-agent --push REMOTE`, docs/remote-runners.md).

A runner on another host has its own clone. It starts a job from the commit
recorded at submit, which its clone may not have yet: it fetches that one
commit from its push remote (`git fetch REMOTE SHA`; protocol v2 servers,
git's own and the forges, hand out any commit reachable from a branch). When
the job ends it pushes the job's commit to `refs/heads/mam/<job_id>` on that
remote, and the terminal event's `git` says where (`remote`, the URL) or why
not (`push_error`). The workspace, whose clone lacks that commit, fetches the
branch from the recorded URL before `mam diff`/`merge`/`discard` act on it.

Every call is plain git without a shell, never prompts (a missing credential
is an error, not a hung runner), names the repository with `-C`, and puts
`--` before a URL so a recorded value can never be read as an option. The
`ext::` transport (which runs a command) is refused whatever the user's
configuration says: the workspace fetches from a URL a runner reported.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from mam.git.job_tree import WorktreeError, git
from mam.git.run import GIT_TIMEOUT, GitError, git_env, run

NETWORK_TIMEOUT: Final = GIT_TIMEOUT
"""How long one fetch or push may take before it counts as failed."""
_SAFE: Final = ("-c", "protocol.ext.allow=never")
_SCP_LIKE: Final = re.compile(r"^[^/:]+:")
"""`host:path` or `user@host:path`: git reads it as ssh (a colon before any slash)."""


class RemoteError(WorktreeError):
    """A fetch or push that failed, in one line (git's own reason)."""


@dataclass(frozen=True)
class PushTarget:
    """Where a runner pushes its jobs' branches: what the user gave, and the URL the record names."""

    given: str
    """The remote's name in the runner's clone, or a URL or path."""
    url: str
    """A URL the workspace can fetch from: the remote's fetch URL, a relative path made absolute, and no
    password (an `https://user:token@host` URL is recorded as `https://user@host`)."""


def _looks_like_url(value: str) -> bool:
    return "://" in value or "/" in value or bool(_SCP_LIKE.match(value)) or value in (".", "..")


def resolve_push(top: Path, given: str) -> PushTarget:
    """`--push REMOTE` for the clone at `top`: a remote's name (it must exist) or a URL/path; else one line."""
    if not given or given.startswith("-"):
        raise WorktreeError(f"--push {given!r}: name a remote of the runner's clone (e.g. origin) or a URL")
    if _looks_like_url(given):
        return PushTarget(given=given, url=recorded_url(top, given))
    url = git(top, "remote", "get-url", "--", given, check=False)
    if not url:
        names = git(top, "remote", check=False).split()
        have = f"it has: {', '.join(names)}" if names else "it has none"
        raise WorktreeError(
            f"--push {given}: the clone at {top} has no remote named {given} ({have}); pass a remote's name or a URL"
        )
    return PushTarget(given=given, url=recorded_url(top, url))


def recorded_url(top: Path, url: str) -> str:
    """`url` as the record keeps it: a local path absolute (git reads it relative to `top`), no password."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.password is not None:
            host = parts.hostname or ""
            netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
        return url
    if _SCP_LIKE.match(url):
        return url
    return os.path.normpath(os.path.join(top, url))


def _run(top: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = git_env() | {"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never"}  # fail, never ask
    try:
        return run(top, *args, timeout=NETWORK_TIMEOUT, env=env, options=_SAFE)
    except GitError as exc:
        raise RemoteError(str(exc)) from None


def reason(out: subprocess.CompletedProcess[str]) -> str:
    """git's reason for a failure, in one line: its first `fatal:`/`error:` line (the lines after it are
    advice), else its last line."""
    lines = [line.strip() for line in (out.stderr or out.stdout or "").splitlines() if line.strip()]
    for at, line in enumerate(lines):
        if line.startswith(("fatal:", "error:")):
            said = line.split(":", 1)[1].strip()
            if said.endswith(":") and at + 1 < len(lines):  # `unable to connect to HOST:` then the reason
                said = f"{said} {lines[at + 1]}"
            return said
    for line in lines:
        if line.startswith("! ["):  # a refused ref from `git push` (`! [rejected] ... (non-fast-forward)`)
            return line
    return lines[-1] if lines else f"exit code {out.returncode}"


def has_commit(top: Path, sha: str) -> bool:
    """Whether the repository at `top` holds the commit `sha`."""
    return bool(git(top, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}", check=False))


def fetch_commit(top: Path, remote: str, sha: str) -> None:
    """Bring the commit `sha` into the clone at `top` from `remote` (a name or URL); `RemoteError` if not."""
    out = _run(top, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote, sha)
    if out.returncode != 0 or not has_commit(top, sha):
        raise RemoteError(f"git fetch {remote} {sha[:12]}: {reason(out)}")


def push_branch(top: Path, remote: str, commit: str, branch: str) -> None:
    """Push `commit` to `refs/heads/<branch>` on `remote`; `RemoteError` with git's reason if refused."""
    out = _run(top, "push", "--quiet", "--no-verify", "--", remote, f"{commit}:refs/heads/{branch}")
    if out.returncode != 0:
        raise RemoteError(f"git push {remote} {branch}: {reason(out)}")


def fetch_branch(top: Path, url: str, branch: str) -> None:
    """`git fetch URL BRANCH:BRANCH` into the workspace's clone at `top`; `RemoteError` with git's reason
    (only: the caller names the URL) if not."""
    ref = f"refs/heads/{branch}"
    out = _run(top, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", url, f"{ref}:{ref}")
    if out.returncode != 0:
        raise RemoteError(reason(out))


__all__ = [
    "PushTarget",
    "RemoteError",
    "fetch_branch",
    "fetch_commit",
    "has_commit",
    "push_branch",
    "reason",
    "recorded_url",
    "resolve_push",
]
