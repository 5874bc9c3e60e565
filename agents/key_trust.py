"""Which projector key a runner trusts: one pinned by fingerprint (`--projector-key SHA`) is taken from the
projector's retained status only when it has that fingerprint.

A runner given the key itself (the workspace's `projector.pub`) needs nothing here; one given only its
fingerprint waits for `projector/status` to announce a key with it before it subscribes to any state. A
different key is a wrong `--projector-key`: the runner refuses to go on (exit 2). Following a remade key
(`--projector-key` naming `projector.pub`) is `StateReader.adopt`'s, on each status the runner reads.
"""

from __future__ import annotations

import logging

import aiomqtt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.client.inbox import messages
from mam.contract.errors import UsageError
from mam.contract.signing import fingerprint, public_key_from_b64
from mam.contract.status import decode_projector_status

log = logging.getLogger("mam.agent")


async def learn_key(client: aiomqtt.Client, topic: str, workspace_id: str, pinned: str | None) -> Ed25519PublicKey:
    """The projector's key from its retained status on `topic`, only if it has the `pinned` fingerprint."""
    log.info("waiting for the projector of workspace %s to announce key %s", workspace_id, pinned)
    await client.subscribe(topic, qos=1)
    async for message in messages(client):
        payload = message.payload if isinstance(message.payload, bytes) else b""
        status = decode_projector_status(payload) if str(message.topic) == topic else None
        if status is None or status.public_key is None:
            continue
        try:
            key = public_key_from_b64(status.public_key)
        except ValueError:
            continue
        if fingerprint(key) != pinned:
            raise UsageError(
                f"--projector-key {pinned}: the projector of workspace {workspace_id} announces key "
                f"{fingerprint(key)}; pass the fingerprint it logs at start, or its projector.pub file"
            )
        log.info("states are verified with the projector's key %s", pinned)
        await client.unsubscribe(topic)
        return key
    raise aiomqtt.MqttError("the broker closed the connection")


__all__ = ["learn_key"]
