"""Topics are formatted in one module (issue 44, part 6): `mam.contract.topics` builds every `mam/<ws>/...` topic and
filter; no other source file writes one as a string (broker/acl.py's rules included)."""

from __future__ import annotations

import ast
import re

import pytest

from mam.contract.topics import PROJECTOR_WRITES, WRITER_WRITES, projector_owner, workspace_filter

from support import CHECKOUT

SOURCES = ("mam", "agents", "broker", "projector", "web", "mcp_server")
TOPIC = re.compile(r"^mam/([^/]*/(jobs|agents|rejected|projector)(/|$)|[#+](/|$)|[^/]*/#$)")
"""A string that reads as a mam topic or filter: `mam/{ws}/jobs/+/events`, `mam/#`, `mam/+/rejected`
(a git branch `mam/{job}` is not one: nothing after it)."""


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def topic_strings(source: str) -> list[tuple[int, str]]:
    return [
        (line, text)
        for line, text in _texts(ast.parse(source))
        if TOPIC.match(text) and "\n" not in text and " " not in text
    ]


@pytest.mark.fast
def test_the_finder_sees_a_topic_in_every_spelling_and_no_branch() -> None:
    found = topic_strings(
        'a = f"mam/{ws}/jobs/+/events"\nb = "mam/#"\nc = f"mam/{w}/rejected"\nd = f"mam/{job}"\ne = f"mam/{ws}/#"\n'
    )
    assert [text for _, text in found] == ["mam/{}/jobs/+/events", "mam/#", "mam/{}/rejected", "mam/{}/#"]


@pytest.mark.fast
def test_no_source_but_the_topics_module_formats_a_topic() -> None:
    own = CHECKOUT / "mam" / "contract" / "topics.py"
    files = [path for root in SOURCES for path in sorted((CHECKOUT / root).rglob("*.py")) if path != own]
    assert len(files) > 200  # the walk saw the tree, not an empty directory
    found = {
        str(path.relative_to(CHECKOUT)): hits
        for path in files
        if (hits := topic_strings(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "build topics with mam.contract.topics (Topics, workspace_filter)"


@pytest.mark.fast
def test_filters_across_workspaces_and_the_projectors_own_topics() -> None:
    assert workspace_filter(None) == "mam/#" and workspace_filter("ws1") == "mam/ws1/#"
    assert [workspace_filter(None, rest) for rest in WRITER_WRITES] == ["mam/+/jobs/+/events", "mam/+/agents/+/status"]
    for rest in PROJECTOR_WRITES:
        assert projector_owner(workspace_filter("ws1", rest).replace("+", "x")) == "ws1", rest
    for rest in WRITER_WRITES:
        assert projector_owner(workspace_filter("ws1", rest).replace("+", "x")) is None, rest
