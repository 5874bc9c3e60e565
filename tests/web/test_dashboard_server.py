"""The dashboard's server side, over real sockets: every broker, the event stream, cancel, login, exposure.

(The page itself is tested in a real browser in `test_dashboard_browser.py`.)
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from dashboard_server_support import Stream, dashboard, request

from mam.broker.passwords import set_password
from mam.contract.broker_url import parse_broker_url
from mam.contract.errors import UsageError
from mam.contract.workspace import resolve
from mam.web.server import serve_dashboard

from brokers import RunningBroker
from e2e import projector_process
from support import DEAD_BROKER
from workspace_support import WorkspacePaths


async def test_stream_shows_states_and_refusals_and_cancel_answers_with_the_verdict_on_every_broker(
    broker: RunningBroker, ws: WorkspacePaths, guard: Path
) -> None:
    from mam.agents.publisher import Publisher

    async with projector_process(broker, ws.root, guard), dashboard(ws.root, broker.url) as page:
        async with Stream(page, "status=submitted,cancelled") as stream:
            snapshot = await stream.next("snapshot")
            assert snapshot["jobs"] == [] and snapshot["detail"] is None
            async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(broker.url)) as pub:
                await pub.submit(prompt="p", agent="nobody", job_id="dash-1", labels={"k": "v"}, wait=True)
            job = await stream.next("job", lambda d: d["record"]["job_id"] == "dash-1")
            assert job["shown"] and job["record"]["status"] == "submitted"

            status, _, body = await request(
                page, "POST", "/api/jobs/dash-1/cancel", body=b"{}", headers={"Content-Type": "application/json"}
            )
            assert (status, json.loads(body)) == (200, {"job_id": "dash-1", "status": "cancelled"})
            await stream.next("job", lambda d: d["record"]["status"] == "cancelled" and d["shown"])

            status, _, body = await request(
                page, "POST", "/api/jobs/dash-1/cancel", body=b"{}", headers={"Content-Type": "application/json"}
            )
            assert status == 409 and "a finished job never changes" in json.loads(body)["error"]
            refusal = await stream.next("refusal", lambda d: d.get("job_id") == "dash-1")
            assert "finished job" in refusal["reason"]

        # A reconnect with another filter and a job's detail: the record and its audit log come in the snapshot.
        async with Stream(page, "status=running&job=ash-1") as stream:  # a suffix, as the CLI takes it
            snapshot = await stream.next("snapshot", lambda d: d["projector"] is not None)
            assert snapshot["jobs"] == [] and snapshot["projector"]["status"] == "online"
            assert snapshot["detail"]["job_id"] == "dash-1" and snapshot["detail"]["record"]["status"] == "cancelled"
            assert [e["event"]["type"] for e in snapshot["detail"]["events"]] == ["submitted", "cancel_requested"]


async def test_a_password_file_asks_for_a_login(ws: WorkspacePaths, tmp_path: Path) -> None:
    passwords = tmp_path / "passwd"
    set_password(passwords, "ada", "s3cret")
    async with dashboard(ws.root, DEAD_BROKER, password_file=passwords) as page:
        status, headers, _ = await request(page, "GET", "/")
        assert status == 401 and headers["www-authenticate"].startswith("Basic")
        wrong = base64.b64encode(b"ada:nope").decode()
        assert (await request(page, "GET", "/", headers={"Authorization": f"Basic {wrong}"}))[0] == 401
        right = base64.b64encode(b"ada:s3cret").decode()
        status, headers, body = await request(page, "GET", "/", headers={"Authorization": f"Basic {right}"})
        assert status == 200 and b"<title>mam dashboard</title>" in body
        assert (
            "script-src" not in headers["content-security-policy"]
            and "default-src 'self'" in headers["content-security-policy"]
        )


async def test_off_loopback_without_a_login_is_refused_and_loopback_answers_only_loopback_names(
    ws: WorkspacePaths,
) -> None:
    workspace = resolve(workspace=ws.root, env={})
    with pytest.raises(UsageError, match="--password-file"):
        await serve_dashboard(workspace, parse_broker_url(DEAD_BROKER), host="0.0.0.0", port=0)
    async with dashboard(ws.root, DEAD_BROKER) as page:
        assert (await request(page, "GET", "/"))[0] == 200
        # A page elsewhere that rebinds its own name to 127.0.0.1 gets nothing: the API's JSON error.
        for path in ("/", "/api/jobs"):
            status, headers, body = await request(page, "GET", path, headers={"Host": "evil.example:8383"})
            assert status == 400 and headers["content-type"] == "application/json", (status, headers)
            error = json.loads(body)["error"]
            assert "'evil.example:8383'" in error and "127.0.0.1" in error and "\n" not in error, error
        for name in ("localhost:1", "[::1]:1", "127.0.0.1"):  # every loopback name, with a port or without
            assert (await request(page, "GET", "/api/jobs", headers={"Host": name}))[0] != 400, name
        # Cancel takes JSON only: a cross-site form cannot post it.
        assert (await request(page, "POST", "/api/jobs/x/cancel", body=b"reason=x"))[0] == 415


async def test_refusals_from_before_the_start_come_from_the_log_dir_newest_first_never_through_a_link(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws.logs.mkdir(parents=True)
    lines = [{"received_at": f"2026-01-01T00:00:0{i}Z", "topic": "t", "reason": f"reason {i}"} for i in range(3)]
    (ws.logs / "_rejected.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with dashboard(ws.root, DEAD_BROKER) as page, Stream(page) as stream:
        assert [r["reason"] for r in (await stream.next("snapshot"))["refusals"]] == [
            "reason 2",
            "reason 1",
            "reason 0",
        ]
    planted = tmp_path / "planted.jsonl"
    planted.write_text(json.dumps({"reason": "not the projector's"}) + "\n")
    (ws.logs / "_rejected.jsonl").unlink()
    (ws.logs / "_rejected.jsonl").symlink_to(planted)
    async with dashboard(ws.root, DEAD_BROKER) as page, Stream(page) as stream:
        assert (await stream.next("snapshot"))["refusals"] == []
