"""The runner of your own in docs/remote-runners.md ("A runner of your own") runs as written: a plain paho
client that makes an ed25519 key, verifies the projector's states, claims a job with its key and signs
every event; the job is recorded claimed by it, running, then succeeded with its output."""

from __future__ import annotations

import base64
import hashlib
import re
import sys

from runner_support import log_events, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import CHECKOUT, run, wait_projector_online
from workspace_support import WorkspacePaths

DOC = CHECKOUT / "docs" / "remote-runners.md"


def doc_script() -> str:
    match = re.search(
        r"<!-- plain-runner: my_runner.py -->\n```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S
    )
    assert match, "docs/remote-runners.md has no plain-runner block"
    return match.group(1)


async def test_the_plain_runner_in_the_docs_claims_runs_and_reports_a_job(ws: WorkspacePaths) -> None:
    script = ws.root.parent / "my_runner.py"
    script.write_text(doc_script())
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port):
        status = await wait_projector_online(url, ws_id)
        fingerprint = "sha256:" + hashlib.sha256(base64.b64decode(status["public_key"])).hexdigest()
        await submit(url, ws, "job-plain", "say hello", agent="hello")
        ran = await run(
            [sys.executable, str(script), "127.0.0.1", str(port), ws_id, fingerprint, "hello"],
            cwd=ws.elsewhere,
            timeout=60,
        )
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout.decode().split() == ["job-plain", "succeeded"]
    events = log_events(ws, "job-plain")
    assert [e["type"] for e in events] == ["submitted", "claimed", "started", "heartbeat", "output", "succeeded"]
    claim = events[1]
    assert claim["runner"] == "my-runner" and claim["runner_key"], claim
    assert events[4]["text"] == "hello from my-runner\n" and events[3]["seq"] == 1
