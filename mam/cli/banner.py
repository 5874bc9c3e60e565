"""What `mam up` prints once it serves.

Short by default: where it listens (and why, when not on the port a user
expects), the workspace, and the next two commands to run, printed so they
run as written from the shell `mam up` was started in. `mam up -v` adds the
internals: the bound sockets, the registry and log paths, the
`MAM_BROKER_URL` export, a `mosquitto_pub`/`mosquitto_sub` example (one line that
makes a new job each time it is pasted, as written in bash, zsh or fish) and the
delivery guarantees. Every line of the long form keeps its exact text
(scripts read them); `mam up: broker    URL` stays the first line in both
forms, the URL its last word.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mam.contract.topics import Topics
from mam.contract.workspace import RULE_ENV, RULE_FLAG, Workspace

if TYPE_CHECKING:
    from mam.broker.server import EmbeddedBroker

EXAMPLE_AGENT = "shell"
"""The agent the next-step commands use: its runner needs no agent CLI or login, so the
submitted job runs on any machine (an example for `claude-code` stays queued where no
such runner exists)."""

EXAMPLE_SCRIPT = "echo hello"


SHELL_JOB_ID = "hello-$(date +%s)-$$"
"""The example's job id, as `sh` makes it: the time and the shell's pid, new at each paste."""


def mqtt_example(topics: Topics, target: str, job_id: str | None = None) -> str:
    """One line that submits a job for `shell` with `mosquitto_pub` and prints its state with `mosquitto_sub`,
    under a new job id each time it runs (`SHELL_JOB_ID`; `job_id` fixes one). Run by `sh -c '...'`: the
    same line runs as written in bash, zsh and fish (none of them expands inside single quotes)."""
    marker = "JOB"
    events, state = (topics.events(marker).replace(marker, "$job"), topics.state(marker).replace(marker, "$job"))
    payload = f'{{"type":"submitted","prompt":"{EXAMPLE_SCRIPT}","agent":"{EXAMPLE_AGENT}"}}'.replace('"', '\\"')
    script = (
        f'job={job_id or SHELL_JOB_ID}; mosquitto_pub {target} -q 1 -t "{events}" -m "{payload}" '
        f'&& mosquitto_sub {target} -C 1 -v -t "{state}"'
    )
    return f"sh -c '{script}'"


def example_job_id() -> str:
    """A job id for the banner's example that no one's own job is likely to have."""
    return f"hello-{secrets.token_hex(2)}"


def command(name: str, argv0: str | None = None) -> str:
    """How to call mam's executable `name` from the shell `mam up` runs in: the bare name
    when PATH finds this installation's, else the path beside the running `mam` as it was
    typed (`.venv/bin/mam-agent` after `.venv/bin/mam up`)."""
    sibling = Path(argv0 if argv0 is not None else sys.argv[0]).parent / name
    if not sibling.is_file():
        return name
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == sibling.resolve():
        return name
    return shlex.quote(str(sibling))


def next_steps(workspace: Workspace, *, argv0: str | None = None) -> tuple[str, str]:
    """The two commands to run next: a runner for `shell`, then a job it runs. They name
    the workspace when `mam up` was told it (a flag or $WORKSPACE_ROOT); found from the
    cwd, the same cwd finds it again."""
    where = f" --workspace {shlex.quote(str(workspace.root))}" if workspace.rule in (RULE_FLAG, RULE_ENV) else ""
    runner = f"{command('mam-agent', argv0)} --agent {EXAMPLE_AGENT}{where}"
    submit = (
        f"{command('mam', argv0)} submit --agent {EXAMPLE_AGENT} --prompt {shlex.quote(EXAMPLE_SCRIPT)} --follow{where}"
    )
    return runner, submit


def banner(
    workspace: Workspace,
    broker: EmbeddedBroker,
    *,
    login: bool = False,
    job_id: str | None = None,
    why: str | None = None,
    verbose: bool = False,
) -> str:
    """The banner: short, or with `verbose` every line of the long form as well.

    `why` says why the broker is not on the port a user would expect (see
    `mam.cli.up.choose_port`); the line names the port it serves on instead.
    """
    from mam.broker.config import is_loopback

    url, host, port = broker.address.url, broker.address.host, broker.address.port
    runner, submit = next_steps(workspace)
    lines = [f"mam up: broker    {url}"]
    if verbose:
        lines.append(f"mam up: listening {broker.listening}")
    for name, (bound, at) in broker.endpoints.items():  # listeners the user asked for: where it listens too
        scheme = "ws" if name == "ws" else "mqtts"
        lines.append(f"mam up: {name:<9} {scheme}://{bound}:{at}")
    if not login and not is_loopback(broker.host):
        lines.append(
            "mam up: warning: --allow-anonymous: anyone who can reach this broker can submit jobs that runners execute"
        )
    if why:
        lines.append(f"mam up: {why}; serving on {port} (this workspace keeps it while it is free)")
    lines.append(f"mam up: workspace {workspace.id}  (root {workspace.root})")
    if verbose:
        topics = Topics(workspace.id)
        target = f"-h {host}" + ("" if port == 1883 else f" -p {port}") + (" -u USER -P PASS" if login else "")
        lines += [
            f"mam up: registry  {workspace.registry_dir}",
            f"mam up: logs      {workspace.logs_dir}",
            f"mam up: for mam clients elsewhere: export MAM_BROKER_URL={url}",
            "mam up: submit a job from any MQTT 3.1.1 client (MQTT 5: see docs/brokers.md, Interop), then read its state",
            "mam up: (a new job each time; runs as written in bash, zsh or fish):",
            f"  {mqtt_example(topics, target, job_id)}",
            "mam up: an event is acknowledged only once it is in the audit log; at start the states of unfinished jobs",
            "mam up: and of the 1,000 that finished last are restored (older ones: `mam show`, `mam jobs`).",
            "mam up: only this process writes states, refusals and projector status; --acl-file sets who may do what else;",
            "mam up: other clients' sessions are kept in memory only: for a shared broker, see docs/brokers.md.",
        ]
    if login:
        lines.append("mam up: clients log in: export MAM_BROKER_URL=mqtt://USER:PASS@" + url.split("://", 1)[1])
    lines += [
        f"mam up: next, a runner:  {runner}",
        f"mam up: then a job:      {submit}",
        "mam up: Ctrl-C stops both."
        + (
            ""
            if verbose
            else "  (mam up -v: listeners, paths, an MQTT example; "
            "it speaks MQTT 3.1.1, MQTT 5: docs/brokers.md#interop)"
        ),
    ]
    return "\n".join(lines)
