"""Every command in every doc runs as written, as far as a parser can tell; every link lands.

For each ```sh/```bash block of README.md and docs/*.md, every line invoking `mam`, `mam-agent`,
`mam-broker` or `mam-projector` (also inside `$(...)`, after `&&` or a pipe) is parsed by that
program's real argparse parser, built from the module its console script names in pyproject.toml; an error names
the page, the line, the command and argparse's message. Blocks in other languages (json, python,
text: configs, output, diagrams) are shown, not run. Every relative link and image of those pages
must name an existing file and, for a page, one of its headings' anchors. The quick start itself
runs end to end in test_readme.py, and every command that can runs against a live `mam up` in
test_docs_live.py.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import tomllib
from functools import cache
from pathlib import Path

import pytest
from doc_pages import CHECKOUT, PAGES, Command, anchors, commands, links, relative

PROGRAMS = {"mam", "mam-agent", "mam-broker", "mam-projector"}

PENDING_PAGES = {CHECKOUT / "docs" / "api.md": "the dashboard's JSON API, written with the API itself (issue 24)"}
"""Pages linked before they are written: a link to one is checked only once it exists."""


@cache
def parser_of(program: str) -> argparse.ArgumentParser:
    """The program's own parser: `build_parser()` of the module its console script runs (pyproject.toml)."""
    scripts = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module = importlib.import_module(scripts[program].partition(":")[0])
    return module.build_parser()


def parse_error(command: Command) -> str | None:
    """argparse's message when the command line does not parse, else None (`--help` parses)."""
    program, *argv = command.argv
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            parser_of(Path(program).name).parse_args(argv)
        except SystemExit as stop:
            if stop.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {stop.code}"
    return None


def page_id(page: Path) -> str:
    return relative(page)


@pytest.mark.fast
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_in_the_page_parses(page: Path) -> None:
    found = list(commands(page, PROGRAMS))
    errors = [
        f"{relative(c.page)}:{c.line}: `{c.source}`: {message}"
        for c in found
        if (message := parse_error(c)) is not None
    ]
    assert not errors, "commands that do not run as written:\n" + "\n".join(errors)


@pytest.mark.fast
def test_the_pages_show_commands_to_check() -> None:
    """The check above is not vacuous: the README's quick start and the CLI reference hold commands of each program."""
    shown = {Path(c.argv[0]).name for page in PAGES for c in commands(page, PROGRAMS)}
    assert shown == PROGRAMS, shown
    assert len(list(commands(CHECKOUT / "README.md", PROGRAMS))) >= 8


@pytest.mark.fast
def test_a_wrong_flag_is_caught_with_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n```sh\nmam jobs --limit 5 && mam jobs --no-such-flag\n```\n\n```json\nmam --nope\n```\n")
    [good, bad] = commands(page, PROGRAMS)
    assert (good.line, good.argv) == (4, ["mam", "jobs", "--limit", "5"])
    assert parse_error(good) is None
    assert bad.line == 4 and "--no-such-flag: no such flag" in (parse_error(bad) or "")


@pytest.mark.fast
def test_shell_forms_are_split_as_a_shell_would(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n"
        'job=$(.venv/bin/mam submit --agent shell --prompt "a; b") || exit 1\n'
        "MAM_BROKER_URL=mqtt://h:1 mam watch --json | jq . 2>/dev/null\n"
        'eval "$(mam completion bash)"\n'
        "mam-agent --agent shell \\\n  --concurrency 2   # a comment\n"
        "```\n"
        "- a list item:\n\n  ```sh\n  mam jobs tree > tree.txt\n  ```\n"
    )
    assert [(c.line, c.argv) for c in commands(page, PROGRAMS)] == [
        (2, [".venv/bin/mam", "submit", "--agent", "shell", "--prompt", "a; b"]),
        (3, ["mam", "watch", "--json"]),
        (4, ["mam", "completion", "bash"]),
        (5, ["mam-agent", "--agent", "shell", "--concurrency", "2"]),
        (11, ["mam", "jobs", "tree"]),
    ]


@pytest.mark.fast
@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_and_image_lands(page: Path) -> None:
    broken = []
    for line, target in links(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if file in PENDING_PAGES and not file.exists():
            continue
        if not file.exists():
            broken.append(f"{relative(page)}:{line}: {target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{relative(page)}:{line}: {target}: no heading makes #{anchor} in {relative(file)}")
    assert not broken, "links that go nowhere:\n" + "\n".join(broken)


@pytest.mark.fast
def test_a_broken_anchor_and_a_missing_file_are_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n\n## A section, with `code`\n\n[ok](#a-section-with-code) [bad](#nowhere) `[code](no.md)`\n"
    )
    text = page.read_text()
    assert anchors(text) == {"top", "a-section-with-code"}
    assert list(links(text)) == [(5, "#a-section-with-code"), (5, "#nowhere")]
