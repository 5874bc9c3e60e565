"""`require` and `priority` from every face: the Python API, the MCP server's `submit_job` (with its waiting
note when no runner has the labels), and `mam retry`, which carries them over; and `mam-agent --label` in the
runner's status."""

from __future__ import annotations

import json

from fleet_support import shell_runner
from mcp_support import call, mcp_session, refused

from brokers import free_port
from e2e import up_process, workspace_id
from support import Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_require_and_priority_from_the_api_mcp_and_retry(ws: WorkspacePaths) -> None:
    from mam.agents import Publisher
    from mam.contract.broker_url import parse_broker_url
    from mam.contract.workspace import resolve

    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), shell_runner(url, ws, "gpu-box", "--label", "gpu=a100") as box:
        async with Watch(url, f"mam/{ws_id}/agents/gpu-box/status") as status:
            announced = await status.json(lambda s: s["status"] == "online" and s["pid"] == box.pid)
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            api = await pub.submit(
                prompt="true", agent="shell", job_id="api-job", require={"gpu": "a100"}, priority=5, wait=True
            )
        async with mcp_session(ws, "--broker", url) as session:
            fits = await call(session, "submit_job", prompt="true", agent="shell", require={"gpu": "a100"}, priority=-3)
            stuck = await call(session, "submit_job", prompt="true", agent="shell", require={"gpu": "h100"})
            too_high = await refused(session, "submit_job", prompt="true", agent="shell", priority=5000)
        done = await wait_for_state(url, ws_id, fits["job_id"], lambda r: r["status"] == "succeeded", timeout=30)
        await wait_for_state(url, ws_id, "api-job", lambda r: r["status"] == "succeeded", timeout=30)
        retried = await run(
            mam("retry", "api-job", "--json", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
    assert announced["offers"] is True and announced["labels"] == {"gpu": "a100"}
    assert api.require == {"gpu": "a100"} and api.priority == 5  # type: ignore[union-attr]
    assert done["require"] == {"gpu": "a100"} and done["priority"] == -3 and done["runner"] == "gpu-box"
    assert stuck["status"] == "submitted" and "no runner online for 'shell' has gpu=h100" in stuck["waiting"]
    assert "priority" in too_high and "5000" in too_high, too_high
    assert retried.returncode == 0, retried.stderr
    again = json.loads(retried.stdout)
    assert again["require"] == {"gpu": "a100"} and again["priority"] == 5 and again["retry_of"] == "api-job"
