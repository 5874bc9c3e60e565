"""Every place that cites the design by section names a section its page has.

The design is a first page (docs/design.md: the overview, the parts and the event's path, the contents) and a
page per part (docs/design/*.md). Code, tests and docs cite it as `docs/design/runners.md, Runner identity`,
`docs/design/contract.md (Time and order)`, `design/faces.md#errors` or with the section in quotes; each such
citation in a tracked source or page must name a page that exists and a heading on it (the cited words start
with a heading, or a heading starts with them, as "Runners: end-to-end acknowledgement" or "Budgets" do).
The old single page's name, `DESIGN.md`, is cited nowhere as a place to read.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_pages import CHECKOUT, anchors

_HEADING = re.compile(r"^#{2,3} +(.+?) *#*$", re.M)
_CITE = re.compile(
    r"(?:docs/)?(?P<page>design(?:/[a-z_-]+)?|DESIGN)\.md"
    r"(?:#(?P<anchor>[\w-]+)|(?:,|\s\()\s*[\"']?(?P<section>[A-Za-z][^()\";.`]*))?"
)
_SOURCES = ("*.py", "*.md", "*.js", "*.html", "*.toml")


def headings(page: Path) -> list[str]:
    return [h.lower() for h in _HEADING.findall(page.read_text(encoding="utf-8"))]


def _words(section: str) -> str:
    """The cited words with a wrapped line joined: comment marks and indents between them dropped."""
    return re.sub(r"\s*\n\s*(?:#\s*)?", " ", section).strip(" ,'").lower()


def broken_citations(text: str) -> Iterator[tuple[int, str, str]]:
    """(line, citation, why) of each citation in `text` that names no page or no heading on it."""
    for match in _CITE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if match["page"] == "DESIGN":
            yield line, match[0], "the design is docs/design.md and docs/design/*.md now"
            continue
        page = CHECKOUT / "docs" / f"{match['page']}.md"
        if not page.exists():
            yield line, match[0], f"no page docs/{match['page']}.md"
        elif match["anchor"] and match["anchor"] not in anchors(page.read_text(encoding="utf-8")):
            yield line, match[0], f"no heading makes #{match['anchor']} on docs/{match['page']}.md"
        elif match["section"]:
            words = _words(match["section"])
            if not any(words.startswith(h) or h.startswith(words) for h in headings(page)):
                yield line, match[0].replace("\n", " "), f"no section of docs/{match['page']}.md starts so"


def tracked_sources() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *_SOURCES], cwd=CHECKOUT, capture_output=True, text=True, check=True
    ).stdout
    skip = {
        "docs/design.md",  # the first page says where the design began (`DESIGN.md`)
        str(Path(__file__).relative_to(CHECKOUT)),  # this file's own examples of wrong citations
    }
    return [CHECKOUT / name for name in listed.split("\0") if name and name not in skip]


def test_every_citation_of_the_design_names_a_section_it_has() -> None:
    found = [
        f"{path.relative_to(CHECKOUT)}:{line}: {cite}: {why}"
        for path in tracked_sources()
        if path.exists()
        for line, cite, why in broken_citations(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, "citations of the design that lead nowhere:\n" + "\n".join(found)


def test_the_citations_checked_are_many() -> None:
    """The check above is not vacuous: the code and the docs cite the part pages by section."""
    cited = sum(
        1
        for path in tracked_sources()
        if path.exists()
        for match in _CITE.finditer(path.read_text(encoding="utf-8", errors="replace"))
        if match["section"] or match["anchor"]
    )
    assert cited >= 50, cited


@pytest.mark.fast
def test_a_stale_or_wrong_citation_is_caught() -> None:
    text = (
        '"""Signed (docs/design.md, Runner identity); the journal (docs/design/projector.md, Write\n'
        "    order: one journal); kept (docs/design/runners.md, Nowhere at all); (docs/design/faces.md#errors)\n"
        '(design/faces.md#no-such) (DESIGN.md\'s order) (docs/design/cli.md, Topics)."""\n'
    )
    assert [(line, why.split(" ")[0:2]) for line, _, why in broken_citations(text)] == [
        (1, ["no", "section"]),
        (2, ["no", "section"]),
        (3, ["no", "heading"]),
        (3, ["the", "design"]),
        (3, ["no", "page"]),
    ]
