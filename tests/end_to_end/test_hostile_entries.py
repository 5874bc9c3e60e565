"""Every entry that reads outside JSON takes hostile payloads and goes on: the dashboard, a runner, the
MCP server, `mam rebuild`. (The projector and the embedded broker: `test_hostile_events.py`.)

Each gets the deep nesting of issue 29 (10,000 arrays or objects, which raised `RecursionError` in every
msgspec decoder) and other hostile JSON where it listens, then must do its ordinary work: the dashboard
streams the next job, the runner runs the next job, the MCP server answers the next call, a rebuild
reports the one damaged log and rebuilds the rest.
"""

from __future__ import annotations

import json
import os
import subprocess

import anyio
from dashboard_server_support import Stream, dashboard, request
from runner_support import agent_runner, mock_command
from runner_support import submit as submit_waiting

from mam.contract.topics import Topics

from brokers import RunningBroker
from e2e import projector_process, workspace_id, write_job
from support import BIN, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

JSON = {"Content-Type": "application/json"}
DEEP_ARRAYS = b"[" * 10_000 + b"]" * 10_000
DEEP_OBJECTS = b'{"k":' * 10_000 + b"1" + b"}" * 10_000
HOSTILE = [
    DEEP_ARRAYS,
    DEEP_OBJECTS,
    b'{"type":"submitted","prompt":"p","agent":"a","junk":' + DEEP_ARRAYS + b"}",
    b'{"status":"online","junk":' + DEEP_OBJECTS + b"}",
    b'{"type":"submitted","prompt":"\\ud800","agent":"a"}',
    b'{"status":NaN,"pid":1e400,"pid":-1}',
    b"\xff\xfe not json",
]


async def _publish_hostile(url: str, topics: list[str]) -> None:
    for topic in topics:
        for payload in HOSTILE:
            await publish(url, topic, payload)


async def test_the_dashboard_skips_hostile_messages_refuses_a_deep_body_and_streams_the_next_job(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    t = Topics(workspace_id(ws.root))
    async with projector_process(mosquitto, ws.root, ws.elsewhere), dashboard(ws.root, mosquitto.url) as page:
        async with Stream(page) as stream:
            await stream.next("snapshot")
            await _publish_hostile(
                mosquitto.url,
                [t.events("hostile-1"), t.state("hostile-1"), t.rejected, t.projector_status, t.agent_status("r9")],
            )
            status, _, body = await request(
                page, "POST", "/api/jobs/hostile-1/cancel", body=b'{"reason":' + DEEP_ARRAYS + b"}", headers=JSON
            )
            assert status == 400 and b"nested deeper than 64 levels" in body, body
            await submit_waiting(mosquitto.url, ws, "after-hostile", "plain")
            await stream.next("job", lambda d: d["record"]["job_id"] == "after-hostile")


async def test_a_runner_skips_hostile_offers_states_refusals_and_statuses_and_runs_the_next_job(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    t = Topics(ws_id)
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere),
        agent_runner(mosquitto.url, ws, *mock_command()) as runner,
    ):
        await _publish_hostile(
            mosquitto.url, [t.agent_offers("r1"), t.state("hostile-1"), t.rejected, t.projector_status]
        )
        await submit_waiting(mosquitto.url, ws, "after-hostile", "echo ran")
        await wait_for_state(mosquitto.url, ws_id, "after-hostile", lambda r: r["status"] == "succeeded", timeout=30)
        assert runner.proc.poll() is None
    assert "Traceback" not in runner.output(), runner.output()


async def test_the_mcp_server_answers_the_next_call_after_hostile_arguments(ws: WorkspacePaths) -> None:
    """Raw JSON-RPC over stdio (the SDK's client cannot even write 10,000 levels): a request too deep for the
    SDK's parser (too deep, a lone surrogate, 1e400) gets no answer (the SDK drops the line), an argument of the
    wrong type a tool error; the next call is answered."""
    proc = subprocess.Popen(
        [str(BIN / "mam"), "mcp", "--workspace", str(ws.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ws.elsewhere,
        env=child_env(),
    )
    lines = _Lines(proc)
    try:
        lines.send(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
        )
        assert (await lines.answer(1))["result"]["serverInfo"]["name"] == "mam"
        lines.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        calls = [
            (b"submit_job", b'{"prompt":"p","agent":"a","labels":' + DEEP_ARRAYS + b"}"),
            (b"get_job", b'{"job":' + DEEP_OBJECTS + b"}"),
            (b"get_job", b'{"job":{"k":[[[1]]]},"x":"k","x":NaN}'),
            (b"list_jobs", b'{"status":["\\ud800"],"limit":1e400}'),
        ]
        for n, (tool, arguments) in enumerate(calls, start=10):
            lines.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
                % (n, tool, arguments)
            )
        lines.send(
            b'{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"get_job","arguments":{"job":"nope"}}}'
        )
        answered = await lines.answer(99)
        assert "no job 'nope'" in answered["result"]["content"][0]["text"]
        assert lines.seen[12]["result"]["isError"], lines.seen[12]  # parsed, so answered: a tool error
        assert proc.poll() is None
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(15)


class _Lines:
    """A JSON-RPC peer over a child's stdin/stdout: answers kept by id."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.seen: dict[int, dict] = {}

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    async def answer(self, request_id: int, timeout: float = 20) -> dict:
        assert self.proc.stdout is not None
        with anyio.fail_after(timeout):
            while request_id not in self.seen:
                line = await anyio.to_thread.run_sync(self.proc.stdout.readline)
                assert line, "the MCP server closed its stdout"
                message = json.loads(line)
                if "id" in message:
                    self.seen[message["id"]] = message
        return self.seen[request_id]


async def test_mam_rebuild_reports_a_log_line_nested_too_deep_and_rebuilds_the_rest(ws: WorkspacePaths) -> None:
    write_job(ws, "good-1")
    write_job(ws, "damaged-1")
    events = ws.logs / "damaged-1" / "events.jsonl"
    first = json.loads(events.read_text().splitlines()[0])
    deep = json.dumps(first).encode()[:-1] + b',"junk":' + DEEP_ARRAYS + b"}"
    events.write_bytes(deep + b"\n")
    before = (ws.jobs / "damaged-1.json").read_bytes()
    for args in (("--verify",), ()):
        done = await run(mam("rebuild", "--json", *args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        report = json.loads(done.stdout)
        assert list(report["corrupt"]) == ["damaged-1"], report
        assert "nested deeper than 64 levels" in report["corrupt"]["damaged-1"]
    assert (ws.jobs / "damaged-1.json").read_bytes() == before, "kept as it was"
    assert (ws.jobs / "good-1.json").is_file()
    assert os.path.getsize(events) > 20_000
