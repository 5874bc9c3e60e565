"""Serving the dashboard: bind, then run the hub and uvicorn in one task group until cancelled.

`mam dashboard` and `mam up --dashboard` both call `serve_dashboard`.
"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import anyio.abc
import uvicorn
from prometheus_client import CollectorRegistry

from mam.broker.config import is_loopback
from mam.contract.broker_list import Brokers
from mam.contract.errors import UsageError
from mam.contract.workspace import Workspace
from mam.web.app import build_app
from mam.web.auth import Logins, check_exposure
from mam.web.cli import DEFAULT_PORT
from mam.web.hub import Hub
from mam.web.limits import ACCEPT_BACKLOG, BUSY, WRITE_STALL, caps
from mam.web.uvicorn_internals import QuietServer, check, guarded_protocol

SHUTDOWN_GRACE = 3  # seconds; uvicorn's timeout_graceful_shutdown is an int


async def serve_dashboard(
    workspace: Workspace,
    broker: Brokers,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    password_file: Path | None = None,
    metrics: CollectorRegistry | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; report the page's URL once it answers. `metrics`: the serving process's
    registry, also served at `/metrics` (`web/metrics.py`)."""
    check_exposure(host, password_file)
    check()  # LibraryChanged, naming it, if uvicorn lacks what the dashboard's protocol relies on
    logins = Logins(password_file) if password_file is not None else None
    sock = _bind(host, port)
    hub = Hub(workspace, broker)
    cap = caps()
    app = build_app(hub, broker, logins=logins, loopback=is_loopback(host), streams=cap.streams, metrics=metrics)
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        http=guarded_protocol(cap.connections, busy=BUSY, stall=WRITE_STALL),
        limit_concurrency=cap.connections + 1,
        backlog=ACCEPT_BACKLOG,  # + 1: the protocol refuses the connections
    )
    server = QuietServer(config)
    async with anyio.create_task_group() as tg:
        await tg.start(hub.run)
        tg.start_soon(_run, server, sock)
        task_status.started(_url(host, sock.getsockname()[1]))


async def _run(server: QuietServer, sock: socket.socket) -> None:
    try:
        await server.serve(sockets=[sock])
    finally:
        server.should_exit = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE + 1):
            await server.shutdown(sockets=[sock])
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot serve the dashboard on {host}:{port} ({exc.strerror}): pick another port (0 picks a free one)"
        ) from None
    sock.listen(ACCEPT_BACKLOG)
    sock.set_inheritable(False)
    return sock


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    return f"http://[{shown}]:{port}/" if ":" in shown and not shown.startswith("[") else f"http://{shown}:{port}/"
