"""`mam doctor`'s broker and projector checks: one connection to the broker clients would use.

- `broker.reachable`: the broker (`--broker`, `$MAM_BROKER_URL`, `.mam/runtime.json` or the default,
  as every client chooses it) takes a connection; a warning when the runtime file names another one
  (what a client publishes there is not recorded here).
- `projector.online`: the workspace's projector announces itself `online` on it, with a fresh
  heartbeat (`degraded`: a warning with its reason; `offline`, stale or none: a failure).
- `projector.key`: `.mam/projector.pub`, which runners verify states with, is the key the projector
  announces; without the file a runner here needs `--projector-key`.
"""

from __future__ import annotations

import aiomqtt
import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.client.announced import read_status
from mam.client.failover import connect
from mam.client.tls import describe_failure
from mam.contract.broker_list import Brokers, overlap, parse_brokers
from mam.contract.checks import Check, fail, ok, skip, warn
from mam.contract.errors import UsageError
from mam.contract.signing import fingerprint, load_workspace_key, public_key_from_b64, public_key_path
from mam.contract.status import ProjectorStatus, describe_heartbeat, stale
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.registry.runtime import read_runtime

CONNECT_TIMEOUT = 10.0
"""How long the broker may take to answer before it counts as unreachable."""


async def broker_checks(workspace: Workspace, brokers: Brokers, source: str) -> list[Check]:
    """`broker.reachable`, `projector.online`, `projector.key`."""
    up = f"mam up --workspace {workspace.root}"
    try:
        with anyio.fail_after(CONNECT_TIMEOUT):
            async with connect(brokers) as client:
                status = await read_status(client, Topics(workspace.id))
    except (aiomqtt.MqttError, TimeoutError) as exc:
        raw = (
            (str(exc) or type(exc).__name__)
            if isinstance(exc, aiomqtt.MqttError)
            else f"no answer in {CONNECT_TIMEOUT:g}s"
        )
        gone = f"the broker {brokers.url} cannot be reached"
        return [
            fail(
                "broker.reachable",
                f"{brokers.url} (from {source}) cannot be reached: {raw}",
                _unreachable_fix(brokers, raw, up),
            ),
            skip("projector.online", gone),
            _key(workspace, None, reached=False),
        ]
    return [
        _reachable(workspace, brokers, source),
        _online(workspace, status, brokers, up),
        _key(workspace, status, reached=True),
    ]


def _unreachable_fix(brokers: Brokers, raw: str, up: str) -> str:
    lowered = raw.lower()
    if "not authori" in lowered or "bad user name or password" in lowered:
        return "check user:pass in --broker or MAM_BROKER_URL"
    tls = describe_failure(raw, brokers.url)
    if tls is not None and (brokers.url.startswith("mqtts") or "[ssl" in lowered):
        return tls.rpartition("): ")[2] or tls
    return f"start the workspace's broker and projector: {up}; or pass --broker / set MAM_BROKER_URL to the broker that serves it"


def _reachable(workspace: Workspace, brokers: Brokers, source: str) -> Check:
    runtime = read_runtime(workspace)
    if runtime is not None and not overlap(parse_brokers(runtime.broker), brokers):
        return warn(
            "broker.reachable",
            f"{brokers.url} (from {source}) answers, but {runtime.served_by} (pid {runtime.pid}) serves this "
            f"workspace on {runtime.broker}: what is published on {brokers.url} is not recorded here",
            f"unset MAM_BROKER_URL, or pass --broker {runtime.broker}",
        )
    return ok("broker.reachable", f"{brokers.url} (from {source}) answers")


def _online(workspace: Workspace, status: ProjectorStatus | None, brokers: Brokers, up: str) -> Check:
    now = utc_now()
    if status is None:
        return fail(
            "projector.online",
            f"no projector announces workspace {workspace.id} on {brokers.url}: jobs are not recorded",
            f"start it: {up} (or mam-projector --workspace {workspace.root})",
        )
    where = f"pid {status.pid} on {status.host}"
    if status.status == "offline":
        return fail(
            "projector.online", f"the projector ({where}) announced offline: it stopped", f"start it again: {up}"
        )
    if stale(status, now):
        return fail(
            "projector.online",
            f"{status.status} ({where}) but stale: last heartbeat "
            f"{describe_heartbeat(status, now)}; it, or the broker node it used, is gone",
            f"restart it: {up}",
        )
    if status.status == "degraded":
        return warn(
            "projector.online",
            f"degraded ({where}): {status.detail or 'no reason given'}",
            "fix what the reason names (a full disk, a read-only dir): the projector resumes by itself",
        )
    beat = f", heartbeat {describe_heartbeat(status, now)}" if status.heartbeat_at else ""
    return ok("projector.online", f"online ({where}{beat})")


def _key(workspace: Workspace, status: ProjectorStatus | None, *, reached: bool) -> Check:
    path = public_key_path(workspace)
    try:
        local = load_workspace_key(workspace)
    except UsageError as exc:
        return fail("projector.key", str(exc), f"remove {path}: the projector writes it again at its next start")
    announced = _announced_key(status)
    if local is None:
        if announced is not None:
            return warn(
                "projector.key",
                f"{path} does not exist here; the projector announces {fingerprint(announced)}",
                f"give runners on this machine --projector-key {fingerprint(announced)}",
            )
        return fail(
            "projector.key",
            f"{path} does not exist: runners here refuse to start without it",
            f"start the workspace's projector once (mam up --workspace {workspace.root}), or give "
            "runners --projector-key FILE|sha256:FINGERPRINT",
        )
    if announced is None:
        why = "no projector announces one" if reached else "the broker cannot be reached"
        return ok("projector.key", f"{fingerprint(local)} in {path} (not compared: {why})")
    if fingerprint(announced) != fingerprint(local):
        return fail(
            "projector.key",
            f"the projector announces {fingerprint(announced)}, but {path} holds "
            f"{fingerprint(local)}: runners here would ignore every state it signs",
            "point this workspace at the broker its projector uses, or restart mam up here so the file "
            "and the announced key agree",
        )
    return ok("projector.key", f"{fingerprint(local)}: {path} is the key the projector announces")


def _announced_key(status: ProjectorStatus | None) -> Ed25519PublicKey | None:
    if status is None or not status.public_key:
        return None
    try:
        return public_key_from_b64(status.public_key)
    except ValueError:
        return None


__all__ = ["CONNECT_TIMEOUT", "broker_checks"]
