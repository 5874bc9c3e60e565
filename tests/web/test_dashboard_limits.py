"""What one dashboard client may cost `mam up`, over real sockets against a real `mam up --dashboard`.

Descriptors: a flood of event streams under a 1,024-descriptor limit holds the
dashboard's share and no more, and `mam submit` keeps its time. Memory:
clients that open the stream and never read, on a workspace of large
prompts, stay within a budget, and the memory comes back after they close.
Bodies and list arguments are refused before they are read or looked up.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path

import anyio
import pytest
from dashboard_server_support import Stream, dashboard, request
from dashboard_support import publisher, up_dashboard_process

from mam.client.mqtt import make_client
from mam.contract import events as ev
from mam.contract.broker_url import parse_broker_url
from mam.contract.topics import Topics
from mam.web.hub import PAGE_BYTES
from mam.web.limits import MAX_BODY, WRITE_STALL, caps
from mam.web.rows import PREVIEW

from e2e import workspace_id
from support import BIN, DEAD_BROKER, child_env
from workspace_support import WorkspacePaths

FLOOD = 2000
NOFILE = 1024
KIB = 1024
MIB = 1024 * 1024


def rss(pid: int) -> int:
    """The process's resident memory in bytes (/proc/PID/status VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for {pid}")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def timed_submit(url: str, ws: WorkspacePaths, job_id: str) -> float:
    """Seconds `mam submit` takes to have its job recorded (exit 0 means the projector's verdict came)."""
    started = time.monotonic()
    done = await anyio.run_process(
        [
            str(BIN / "mam"),
            "submit",
            "--prompt",
            "p",
            "--agent",
            "nobody",
            "--job-id",
            job_id,
            "--timeout",
            "20",
            "--broker",
            url,
            "--workspace",
            str(ws.root),
        ],
        env=child_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return time.monotonic() - started


async def open_stream(page: str, query: str = "", *, read_status: bool = True) -> tuple[int, socket.socket | None]:
    """One `GET /api/stream` on a raw socket: its status (0: refused before an answer) and, for a 200 or
    when not read, the open socket."""
    host, port = page.split("//")[1].rstrip("/").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that does not read fills this soon
    sock.setblocking(False)
    try:
        with anyio.fail_after(20):
            if sock.connect_ex((host, int(port))) not in (0, errno.EINPROGRESS):
                raise OSError("connect failed")
            await anyio.wait_writable(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                raise OSError("connect failed")
            sock.sendall(f"GET /api/stream?{query} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            if not read_status:
                return 0, sock
            data = b""
            while b"\r\n" not in data:
                await anyio.wait_readable(sock)
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        sock.close()
        return 0, None
    status = int(data.split()[1]) if data.startswith(b"HTTP/") else 0
    if status == 200:
        return status, sock
    sock.close()
    return status, None


@pytest.mark.slow
async def test_a_flood_of_streams_under_1024_descriptors_holds_the_dashboards_share_and_submit_keeps_its_time(
    ws: WorkspacePaths,
) -> None:
    cap = caps(NOFILE)
    async with up_dashboard_process(ws, nofile=NOFILE) as (url, page, daemon):
        normal = await timed_submit(url, ws, "before-flood")
        statuses: list[int] = []
        held: list[socket.socket] = []
        most = descriptors(daemon.pid)

        async def one() -> None:
            status, sock = await open_stream(page)
            statuses.append(status)
            if sock is not None:
                held.append(sock)

        async def watch() -> None:
            nonlocal most
            while True:  # a measurement, not a wait: the peak of the process's descriptors
                most = max(most, descriptors(daemon.pid))
                await anyio.sleep(0.01)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                async with anyio.create_task_group() as flood:
                    for _ in range(FLOOD):
                        flood.start_soon(one)
                during = await timed_submit(url, ws, "during-flood")
                tg.cancel_scope.cancel()
            assert daemon.proc.poll() is None, daemon.output()
            assert len(held) == cap.streams, (len(held), sorted(set(statuses)))
            assert statuses.count(200) + statuses.count(503) + statuses.count(0) == FLOOD
            assert statuses.count(503) > FLOOD // 2  # refused with an answer, not left hanging
            assert most < NOFILE - 256, f"{most} descriptors: the broker and projector need the rest"
            assert during < normal + 3.0, (normal, during)
            print(
                f"\n{FLOOD} stream connections under nofile {NOFILE}: {len(held)} held, "
                f"{statuses.count(503)} answered 503, {statuses.count(0)} reset; peak {most} descriptors; "
                f"mam submit {normal:.2f} s before, {during:.2f} s during"
            )
        finally:
            for sock in held:
                sock.close()
        # The slots come back once those clients leave.
        with anyio.fail_after(10):
            while (opened := await open_stream(page))[0] != 200:
                await anyio.sleep(0.05)  # retrying until a stream slot is free again
        opened[1].close()
        assert "Too many open files" not in daemon.output()


@pytest.mark.slow
async def test_clients_that_never_read_stay_within_a_memory_budget_and_memory_comes_back(ws: WorkspacePaths) -> None:
    big = "x" * (500 * KIB - 1)
    async with up_dashboard_process(ws) as (url, page, daemon), publisher(url, ws) as pub:
        for i in range(60):
            await pub.submit(prompt=f"{i} {big}", agent="nobody", job_id=f"big-{i:02d}", wait=True)
        async with Stream(page) as stream:  # the list carries a preview of each prompt, not the prompt
            snapshot = await stream.next("snapshot", lambda d: len(d["jobs"]) == 60)
            assert all(len(job["prompt"]) == PREVIEW and job["prompt_cut"] for job in snapshot["jobs"])
            assert len(json.dumps(snapshot)) < 100 * KIB
        idle = peak = rss(daemon.pid)

        async def watch() -> None:
            nonlocal peak
            while True:  # a measurement, not a wait: the peak of the process's memory
                peak = max(peak, rss(daemon.pid))
                await anyio.sleep(0.01)

        sockets: list[socket.socket] = []
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                for i in range(40):  # half of them show big-07's detail, half only the list
                    sockets.append((await open_stream(page, "job=big-07" if i % 2 else "", read_status=False))[1])
                # Changes keep coming for big-07: 500 output events of 60 KiB (30 MB), none of them read.
                topic = Topics(workspace_id(ws.root)).events("big-07")
                async with make_client(parse_broker_url(url)) as client:
                    for n in range(500):
                        await client.publish(topic, ev.encode_event(ev.Output(text=f"{n} " + "o" * (60 * KIB))), qos=1)
                # The pages showing big-07 spent their budget: the dashboard drops them (the others stay).
                with anyio.fail_after(WRITE_STALL + 10):
                    for sock in sockets[1::2]:
                        await dropped(sock)
                tg.cancel_scope.cancel()
        finally:
            for sock in sockets:
                sock.close()
        budget = idle + 40 * 2 * MIB + PAGE_BYTES
        assert peak < budget, f"RSS {peak / MIB:.0f} MB under 40 idle streams, budget {budget / MIB:.0f} MB"
        # Once they close, memory comes back near idle (allowing for the allocator's slack).
        with anyio.fail_after(15):
            while (after := rss(daemon.pid)) > idle + 32 * MIB:
                await anyio.sleep(0.2)  # polling the process's memory (/proc) as it comes back
        print(
            f"\n60 jobs of 500 KiB prompts: mam up {idle / MIB:.0f} MB idle, peak {peak / MIB:.0f} MB with 40 streams "
            f"that never read (500 changes of 60 KiB; budget {budget / MIB:.0f} MB), {after / MIB:.0f} MB after"
        )


async def dropped(sock: socket.socket) -> None:
    """Return once the server has closed the connection (what it had sent is read and thrown away)."""
    while True:
        await anyio.wait_readable(sock)
        try:
            if not sock.recv(1 << 20):
                return
        except ConnectionResetError:
            return


async def test_bodies_and_list_arguments_are_refused_before_they_are_read_or_looked_up(ws: WorkspacePaths) -> None:
    async with dashboard(ws.root, DEAD_BROKER) as page:
        host, port = page.split("//")[1].rstrip("/").split(":")

        async def first_answer(head: str, body: bytes) -> bytes:
            with anyio.fail_after(10):
                async with await anyio.connect_tcp(host, int(port)) as sock:
                    await sock.send(
                        f"POST /api/jobs/j/cancel HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        f"Content-Type: application/json\r\n{head}\r\n\r\n".encode()
                        + body
                    )
                    return await sock.receive()

        # A 20 MB body: 413 from its Content-Length while nearly all of it is still unsent.
        answer = await first_answer(f"Content-Length: {20 * MIB}", b" " * (64 * KIB))
        assert answer.startswith(b"HTTP/1.1 413") and b"too large" in answer, answer[:200]
        # A body in chunks, with no length given: refused once it passes the limit (the rest still unsent).
        chunk = b" " * (16 * KIB)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // len(chunk) + 2))
        answer = await first_answer("Transfer-Encoding: chunked", chunks)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        # List arguments: their length is checked before they are parsed or a job is looked up.
        status, _, body = await request(page, "GET", "/api/stream?status=" + ",".join(["running"] * 10_000))
        assert status == 400 and "at most" in json.loads(body)["error"] and "status=" in json.loads(body)["error"]
        labels = ",".join(f"k{i}=v" for i in range(65))
        status, _, body = await request(page, "GET", f"/api/stream?label={labels}")
        assert status == 400 and "label=" in json.loads(body)["error"]
        status, _, body = await request(page, "GET", "/api/jobs/j/log?before=-1")
        assert status == 400 and "before='-1'" in json.loads(body)["error"]


async def test_a_jobs_log_comes_a_page_at_a_time_newest_first(ws: WorkspacePaths) -> None:
    log_dir = ws.logs / "paged"
    log_dir.mkdir(parents=True)
    lines = [
        {
            "seq": n,
            "received_at": "2026-01-01T00:00:00Z",
            "event": {"type": "output", "id": f"o{n}", "v": 1, "text": f"<{n}>" + "y" * 5000},
        }
        for n in range(400)
    ]
    (log_dir / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with dashboard(ws.root, DEAD_BROKER) as page:
        status, _, body = await request(page, "GET", "/api/jobs/paged/log")
        first = json.loads(body)
        assert status == 200 and 0 < first["start"] and len(body) < 300 * KIB
        assert first["events"][-1]["seq"] == 399
        seen = [e["seq"] for e in first["events"]]
        start, pages = first["start"], 1
        while start > 0:
            older = json.loads((await request(page, "GET", f"/api/jobs/paged/log?before={start}"))[2])
            assert older["end"] == start
            seen = [e["seq"] for e in older["events"]] + seen
            start, pages = older["start"], pages + 1
        assert seen == list(range(400)) and pages >= 8
        async with Stream(page, "job=paged") as stream:  # the detail opens with the tail, and says where it starts
            detail = (await stream.next("snapshot"))["detail"]
            assert detail["log_start"] == first["start"] and detail["events"][-1]["seq"] == 399
