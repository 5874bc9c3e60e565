"""The dashboard's JSON API writes against a real `mam up --dashboard` with a real runner, every response checked
against the OpenAPI description the dashboard serves (`dashboard_api_support.Api`): submit, retry, cancel with a
reason and with its tree; a finished or unknown job refused with its status; bad input a one-line error naming what
was sent, nothing published.
"""

from __future__ import annotations

from typing import Any

from dashboard_api_support import Api, ids
from dashboard_server_support import Stream
from dashboard_support import up_dashboard_process
from runner_support import agent_runner

from workspace_support import WorkspacePaths


async def until_status(api: Api, job_id: str, status: str) -> dict[str, Any]:
    """The job's row once it has `status`: the page's event stream says when (its snapshot, or a change)."""
    async with Stream(api.page, f"status={status}") as stream:
        snapshot = await stream.next("snapshot")
        if not any(job["job_id"] == job_id for job in snapshot["jobs"]):
            await stream.next(
                "job", lambda d: d["record"]["job_id"] == job_id and d["record"]["status"] == status, timeout=30
            )
    found = (await api.get(f"/api/jobs?root={job_id}&status={status}"))["jobs"]
    return next(r for r in found if r["job_id"] == job_id)


async def test_submit_retry_and_cancel_with_reason_and_tree(ws: WorkspacePaths) -> None:
    async with up_dashboard_process(ws) as (url, page, _), agent_runner(url, ws, name="sh1", agent="shell"):
        api = await Api.of(page)
        made = await api.call(
            "POST",
            "/api/jobs",
            {"agent": "shell", "prompt": "echo from the api", "labels": {"via": "api"}, "job_id": "api1"},
            status=201,
        )
        assert made == {"job_id": "api1", "status": "submitted"}
        done = await until_status(api, "api1", "succeeded")
        assert done["labels"] == {"via": "api"} and done["parent"] is None
        assert (await api.get("/api/jobs/api1/output"))["text"] == "from the api\n"

        again = await api.call("POST", "/api/jobs/api1/retry", {}, status=201)
        assert again["retry_of"] == "api1" and again["job_id"] != "api1" and again["status"] == "submitted"
        await until_status(api, again["job_id"], "succeeded")
        named = await api.call("POST", "/api/jobs/api1/retry", {"job_id": "api1-again"}, status=201)
        assert named["job_id"] == "api1-again"

        # A tree of jobs no runner takes, cancelled from its root with a reason.
        for job_id, parent in (("top", None), ("mid", "top"), ("leaf", "mid")):
            body = {
                "agent": "nobody",
                "prompt": f"wait {job_id}",
                "job_id": job_id,
                **({"parent": parent} if parent else {}),
            }
            assert (await api.call("POST", "/api/jobs", body, status=201))["status"] == "submitted"
        assert ids(await api.get("/api/jobs?root=top")) == ["leaf", "mid", "top"]
        cancelled = await api.call("POST", "/api/jobs/top/cancel", {"reason": "wrong branch", "tree": True})
        assert cancelled["job_id"] == "top" and cancelled["status"] == "cancelled"
        assert {t["job_id"] for t in cancelled["tree"]} == {"top", "mid", "leaf"}
        assert all(t["cancel_requested"] for t in cancelled["tree"])
        for job_id in ("mid", "leaf"):
            await until_status(api, job_id, "cancelled")
        reasons = [e["event"].get("reason") for e in (await api.get("/api/jobs/leaf/events"))["events"]]
        assert any(reason and "wrong branch" in reason for reason in reasons), reasons
        top_reason = (await api.get("/api/jobs/top"))["record"]["cancel_reason"]
        assert top_reason == "wrong branch"

        # A plain cancel (its reason optional); a finished job refuses another (409), an unfinished one a retry.
        for job_id in ("solo", "pending"):
            await api.call("POST", "/api/jobs", {"agent": "nobody", "prompt": "p", "job_id": job_id}, status=201)
        plain = await api.call("POST", "/api/jobs/solo/cancel", {})
        assert plain == {"job_id": "solo", "status": "cancelled"}
        await api.refused("/api/jobs/solo/cancel", "finished", method="POST", payload={}, status=409)
        # With its tree, a finished job is no 409: it stays as it ended, the unfinished jobs under it are cancelled.
        await api.call(
            "POST", "/api/jobs", {"agent": "nobody", "prompt": "p", "job_id": "late-kid", "parent": "api1"}, status=201
        )
        under_done = await api.call("POST", "/api/jobs/api1/cancel", {"reason": "tidy", "tree": True})
        assert (under_done["job_id"], under_done["status"]) == ("api1", "succeeded"), under_done
        assert [(t["job_id"], t["status"]) for t in under_done["tree"]] == [
            ("api1", "succeeded"),
            ("late-kid", "cancelled"),
        ]
        assert (await api.get("/api/jobs/late-kid"))["record"]["cancel_reason"] == "cancelled with tree of api1: tidy"
        # An unknown job: 404, one plain line (not the projector's refusal); whole tree or not.
        for payload in ({}, {"tree": True}):
            message = await api.refused(
                "/api/jobs/nosuch/cancel", "no job 'nosuch'", method="POST", payload=payload, status=404
            )
            assert "projector" not in message, message
        await api.refused("/api/jobs/pending/retry", "pending", "submitted", method="POST", payload={}, status=409)

        # Bad writes: nothing is published, one line names what was wrong.
        await api.refused("/api/jobs", "bogus", method="POST", payload={"agent": "shell", "prompt": "x", "bogus": 1})
        await api.refused("/api/jobs", "prompt", method="POST", payload={"agent": "shell"})
        await api.refused("/api/jobs", "prompt", method="POST", payload={"agent": "shell", "prompt": "  "})
        await api.refused("/api/jobs", "agent", "no body", method="POST", payload={"agent": "no body", "prompt": "x"})
        await api.refused(
            "/api/jobs", "retries", method="POST", payload={"agent": "shell", "prompt": "x", "retries": "2"}
        )
        await api.refused(
            "/api/jobs", "permissions", method="POST", payload={"agent": "shell", "prompt": "x", "permissions": "root"}
        )
        await api.refused("/api/jobs/top/cancel", "tree", method="POST", payload={"tree": "yes"})
        await api.refused("/api/jobs/api1/retry", "whatever", method="POST", payload={"whatever": True})
        await api.refused("/api/jobs/pi1/retry", "too short", method="POST", payload={})
        message = (
            await api.call(
                "POST",
                "/api/jobs",
                None,
                raw=b"agent=shell&prompt=x",
                status=415,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        )["error"]
        assert "application/json" in message
        await api.refused(
            "/api/jobs",
            "too large",
            "65536",
            method="POST",
            status=413,
            payload={"agent": "shell", "prompt": "x" * 70_000},
        )
        assert (await api.get("/api/jobs?q=bogus"))["total"] == 0
        assert ids(await api.get("/api/jobs?status=submitted")) == ["pending"]
        assert api.checked >= 30
