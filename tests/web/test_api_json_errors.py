"""Every refusal of the dashboard's own is JSON `{"error": ...}`, as docs/api.md promises for all of them,
against a real `mam up --dashboard`: a route that does not exist (404, not `text/plain "Not Found"`), a
method a route does not take (405, with `Allow`), a static file that is not there; generated paths and
methods (hypothesis) each get one JSON line naming what was sent (issue 43, part 5)."""

from __future__ import annotations

import json

from dashboard_server_support import request
from dashboard_support import up_dashboard_process
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from workspace_support import WorkspacePaths


async def _refused(page: str, method: str, path: str, status: int) -> tuple[str, dict[str, str]]:
    code, headers, body = await request(page, method, path)
    assert code == status, (method, path, code, body[:300])
    assert headers["content-type"] == "application/json", (method, path, headers)
    error = json.loads(body)["error"]
    assert isinstance(error, str) and "\n" not in error and error, body
    return error, headers


async def test_an_unknown_route_and_a_wrong_method_are_refused_in_json(ws: WorkspacePaths) -> None:
    async with up_dashboard_process(ws) as (_, page, _):
        error, _ = await _refused(page, "GET", "/api/jbos", 404)
        assert error == "no such route: GET /api/jbos (the routes: docs/api.md, or GET /api/openapi.json)"
        error, headers = await _refused(page, "POST", "/api/stream", 405)
        assert error == "POST /api/stream: method not allowed: it takes GET, HEAD (docs/api.md)"
        assert headers["allow"] == "GET, HEAD"
        error, headers = await _refused(page, "DELETE", "/api/jobs", 405)  # two routes: the list and the submit
        assert error == "DELETE /api/jobs: method not allowed: it takes GET, HEAD, POST (docs/api.md)"
        assert headers["allow"] == "GET, HEAD, POST"
        error, _ = await _refused(page, "GET", "/static/nope.js", 404)
        assert error == "no such file: GET /static/nope.js"
        error, _ = await _refused(page, "GET", "/" + "a" * 5000, 404)
        assert len(error) < 400 and error.endswith("... (the routes: docs/api.md, or GET /api/openapi.json)")
        code, headers, _ = await request(page, "GET", "/api/jobs")  # what is there still answers as before
        assert code == 200 and headers["content-type"] == "application/json"


def _drawn(count: int, strategy: st.SearchStrategy[tuple[str, str]]) -> list[tuple[str, str]]:
    """`count` examples of `strategy`, the same at every run (sent through one running server, where `@given`
    cannot wrap the test itself)."""
    found: list[tuple[str, str]] = []

    @seed(43)
    @settings(max_examples=count, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(example: tuple[str, str]) -> None:
        found.append(example)

    draw()
    return found


def _paths() -> st.SearchStrategy[str]:
    segment = st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#%"), min_size=1, max_size=12
    )
    return st.lists(segment, min_size=1, max_size=4).map(lambda parts: "/api/nope/" + "/".join(parts))


async def test_generated_unknown_paths_and_methods_are_each_one_json_line(ws: WorkspacePaths) -> None:
    async with up_dashboard_process(ws) as (_, page, _):
        for path, method in _drawn(40, st.tuples(_paths(), st.sampled_from(["GET", "POST", "PUT", "DELETE"]))):
            error, _ = await _refused(page, method, path, 404)
            assert error.startswith(f"no such route: {method} /api/nope/"), error
        for method in ("PUT", "DELETE", "PATCH"):
            error, _ = await _refused(page, method, "/api/agents", 405)
            assert error.startswith(f"{method} /api/agents: method not allowed"), error
