"""`mam submit` against a degraded projector (a full disk) names the degraded status and its reason.

The projector announces `degraded` (retained, with the reason) while it
cannot write; no verdict comes until the disk has room again. `mam submit`
used to wait out its timeout and say only "no verdict came".
"""

from __future__ import annotations

import os
from pathlib import Path

from disk_full_support import fill

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_submit_to_a_degraded_projector_names_the_degraded_status(
    amqtt: RunningBroker, small_disk: Path, tmp_path: Path
) -> None:
    root = small_disk / "workspace"
    root.mkdir()
    ws = WorkspacePaths(root=root, elsewhere=tmp_path / "elsewhere")
    ws.elsewhere.mkdir()
    ws_id = workspace_id(root)
    topic = f"mam/{ws_id}/jobs/job-1/events"
    async with projector_process(amqtt, root, ws.elsewhere, log_dir=tmp_path):
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"a","id":"e1"}')
        await wait_for_state(amqtt.url, ws_id, "job-1")
        filler = small_disk / "filler"
        fill(filler)
        async with Watch(amqtt.url, f"mam/{ws_id}/projector/status") as status:
            await publish(amqtt.url, topic, b'{"type":"claimed","runner":"r","id":"e2"}')
            await status.json(lambda s: s["status"] == "degraded")
        submitted = await run(
            mam(
                "submit",
                "--workspace",
                str(root),
                "--broker",
                amqtt.url,
                "--agent",
                "a",
                "--timeout",
                "2",
                "--job-id",
                "job-2",
                "--prompt",
                "hello",
            ),
            cwd=ws.elsewhere,
            timeout=30,
        )
        os.unlink(filler)
    stderr = submitted.stderr.decode()
    assert submitted.returncode == 3, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert "the projector is degraded: " in lines[0] and "No space left on device" in lines[0], stderr
    assert "no verdict" in lines[-1] and "the projector is degraded: " in lines[-1], stderr
    assert "No space left on device" in lines[-1], stderr
