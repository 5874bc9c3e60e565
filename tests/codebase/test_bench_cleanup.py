"""The benchmarks remove the workspaces they make (also on an error or Ctrl-C) unless `--keep`, and
bench/history.py's table shows what was measured when a figure was not."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from support import CHECKOUT

sys.path.insert(0, str(CHECKOUT / "bench"))

from history import Measured, Size, not_measured, table  # noqa: E402

from _common import cleaned_up, workspace_dir  # noqa: E402

pytestmark = pytest.mark.fast


@pytest.fixture
def tmpdir_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.mark.parametrize("stop", [None, KeyboardInterrupt, RuntimeError])
def test_the_workspaces_go_at_the_end_after_an_error_and_on_ctrl_c(tmpdir_is: Path, stop: type | None) -> None:
    made: list[Path] = []
    try:
        with cleaned_up(keep=False):
            made = [workspace_dir("mam-bench-ws-"), workspace_dir("mam-bench-lat-")]
            (made[0] / ".mam").mkdir()
            (made[0] / ".mam" / "events.jsonl").write_text("{}\n")
            if stop is not None:
                raise stop
    except (KeyboardInterrupt, RuntimeError):
        pass
    assert made and not any(path.exists() for path in made)
    assert list(tmpdir_is.iterdir()) == []


def test_keep_keeps_them_and_says_where(tmpdir_is: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with cleaned_up(keep=True):
        made = workspace_dir("mam-bench-ws-")
    assert made.is_dir()
    assert capsys.readouterr().err.strip() == f"kept: {made}"


def test_the_history_table_shows_what_was_measured_and_why_not_the_rest() -> None:
    small = Size(
        1_000,
        Path("/s"),
        "s",
        results={"mam show": Measured(0.5, 40_000), "mam up start -> first new job recorded": Measured(1.0, 50_000)},
    )
    large = Size(
        100_000,
        Path("/l"),
        "l",
        results={
            "mam show": Measured(0.6, 41_000),
            "mam up start -> first new job recorded": not_measured("over its 600 s limit"),
        },
    )
    lines = table([small, large])
    assert lines[0].startswith("| command | 1,000 jobs: time, peak RSS | 100,000 jobs: time, peak RSS |")
    assert "| `mam show` | 0.50 s, 39 MB | 0.60 s, 40 MB | 1.20x, 1.02x | time <= 2x: met |" in lines
    assert (
        "| `mam up start -> first new job recorded` | 1.00 s, 49 MB | not measured: over its 600 s limit | - |  |"
    ) in lines
    only_small = table([small])
    assert only_small[0].startswith("| command | 1,000 jobs: time, peak RSS | - |") and len(only_small) == 4
