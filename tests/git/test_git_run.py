"""`mam.git.run`: the one git runner. A failure or a timeout is one line naming the git command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mam.git.run import GitError, git, read_capped, run, succeeds


def test_a_failing_git_command_is_one_line_naming_it_with_gits_last_line(tmp_path: Path) -> None:
    with pytest.raises(GitError) as caught:
        git(tmp_path, "rev-parse", "HEAD")
    said = str(caught.value)
    assert said.startswith("git rev-parse: fatal: not a git repository")
    assert "\n" not in said
    assert git(tmp_path, "rev-parse", "HEAD", check=False) == ""
    assert not succeeds(tmp_path, "rev-parse", "HEAD")


def test_a_git_command_that_outlives_its_timeout_is_one_line_naming_it(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    # A real git running a shell alias that blocks on a FIFO until this test opens it for writing.
    try:
        with pytest.raises(GitError) as caught:
            run(tmp_path, "hang", timeout=1.0, options=("-c", f"alias.hang=!cat {fifo} >/dev/null"))
    finally:
        try:  # releases the `cat` git started, so nothing outlives the test
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader (git was stopped before it started one)
            pass
    assert str(caught.value) == "git hang did not finish within 1s"


def test_a_missing_git_is_said_in_the_callers_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GitError, match=r"^git is not on PATH; install git$"):
        git(tmp_path, "status", missing="git is not on PATH; install git")


def test_read_capped_reads_the_start_of_a_long_output_and_says_whether_it_was_cut(tmp_path: Path) -> None:
    long = "x" * 100_000  # more than a pipe holds: git is stopped once the cap is read
    data, cut = read_capped(tmp_path, "say", cap=100, options=("-c", f"alias.say=!printf {long}"))
    assert cut is True and data == b"x" * 100
    data, cut = read_capped(tmp_path, "say", cap=100, options=("-c", "alias.say=!printf short"))
    assert cut is False and data == b"short"
    assert read_capped(tmp_path, "say", cap=100, options=("-c", "alias.say=!printf no; exit 3")) == (b"no", False)


def test_read_capped_stops_a_git_that_outlives_its_timeout(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    try:
        with pytest.raises(GitError) as caught:
            read_capped(tmp_path, "hang", cap=100, timeout=1.0, options=("-c", f"alias.hang=!cat {fifo}"))
    finally:
        try:  # releases the `cat` git started, so nothing outlives the test
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader (git was stopped before it started one)
            pass
    assert str(caught.value) == "git hang did not finish within 1s"
