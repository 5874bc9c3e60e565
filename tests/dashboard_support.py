"""Helpers for the `test_dashboard*` files: a headless Chromium, a served dashboard, screenshots.

(No tests here.)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from mam.agents.publisher import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.workspace import resolve

from brokers import free_port, wait_for_port
from e2e import workspace_id
from support import BIN, Daemon, child_env, wait_projector_online
from workspace_support import WorkspacePaths

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def require_chromium() -> str:
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if path is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + ": CI must install it (.ci/run)")
        pytest.skip(message)
    return path


@asynccontextmanager
async def browser_page(*, viewport: tuple[int, int] = (1280, 900), **context: object) -> AsyncIterator[object]:
    """A page in a fresh headless Chromium (Debian's), `viewport` (width, height) CSS pixels, closed at the end."""
    executable = require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, **context)
            yield await ctx.new_page()
        finally:
            await browser.close()


@asynccontextmanager
async def up_with_dashboard(
    ws: WorkspacePaths,
    *extra: str,
    env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[str, str]]:
    """`mam up --dashboard PORT` for the workspace (with `env` added to its environment: a test hook): yields
    (broker URL, dashboard URL) once both serve."""
    async with up_dashboard_process(ws, *extra, env=env) as (url, page, _):
        yield url, page


@asynccontextmanager
async def up_dashboard_process(
    ws: WorkspacePaths, *extra: str, nofile: int | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, str, Daemon]]:
    """`mam up --dashboard PORT`, under a descriptor limit when `nofile` is given (prlimit execs it, so the
    daemon's pid is mam up's): yields (broker URL, dashboard URL, the daemon) once both serve."""
    port, dashboard = free_port(), free_port()
    limit = ["prlimit", f"--nofile={nofile}:{nofile}", "--"] if nofile is not None else []
    daemon = Daemon(
        [
            *limit,
            str(BIN / "mam"),
            "up",
            "--port",
            str(port),
            "--workspace",
            str(ws.root),
            "--dashboard",
            str(dashboard),
            *extra,
        ],
        cwd=ws.elsewhere,
        env=child_env(**(env or {})),
        log=ws.root.parent / "up.log",
    )
    try:
        url = f"mqtt://127.0.0.1:{port}"
        wait_for_port(port, daemon.proc)
        await wait_projector_online(url, workspace_id(ws.root), pid=daemon.pid)
        wait_for_port(dashboard, daemon.proc)
        yield url, f"http://127.0.0.1:{dashboard}/", daemon
    finally:
        daemon.stop()


@asynccontextmanager
async def publisher(url: str, ws: WorkspacePaths) -> AsyncIterator[Publisher]:
    async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url), by="test") as pub:
        yield pub


def save_screenshot(path: Path) -> None:
    """Keep a screenshot beside the test's files and, when MAM_ARTIFACTS_DIR is set, there too."""
    target = os.environ.get("MAM_ARTIFACTS_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
