"""`mam jobs` says each record it leaves out because it cannot be read, one line on stderr with the fix
(`mam rebuild`, the words `mam show` of it uses), and lists the rest: through the query index and
through a scan of the files, in the table, `-o json`, `-o name` and the tree (issue 43, part 5)."""

from __future__ import annotations

import json
import os

import pytest

from e2e import write_job
from support import mam, run
from workspace_support import WorkspacePaths


async def _mam(ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    done = await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line]


@pytest.mark.parametrize("index", [True, False], ids=["through the index", "by a scan"])
async def test_jobs_says_each_damaged_record_with_the_fix_and_lists_the_rest(ws: WorkspacePaths, index: bool) -> None:
    for job in ("job-a", "job-b", "job-c", "job-d"):
        write_job(ws, job)
    code, out, err = await _mam(ws, "rebuild")  # the registry and its query index, as the projector keeps them
    assert code == 0, err
    assert (ws.jobs / ".index.sqlite").exists(), "the index path is the one under test"
    if not index:
        os.remove(ws.jobs / ".index.sqlite")
    (ws.jobs / "job-b.json").write_bytes(b'{"job_id": "job-b", "stat')  # cut short
    (ws.jobs / "job-d.json").write_bytes(b'{"job_id": 7}')  # JSON, not a record

    _, _, shown = await _mam(ws, "show", "job-b")
    damaged_b = f"mam: record {ws.jobs / 'job-b.json'} is damaged ("
    assert shown.startswith("mam: error: record ") and shown.rstrip().endswith("run `mam rebuild`"), shown

    code, out, err = await _mam(ws, "jobs")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["job-c", "job-a"], out
    said = _lines(err)
    assert len(said) == 2, err  # one line each, nothing else (no "showing the newest 2 of 4")
    assert sum(line.startswith(damaged_b) for line in said) == 1, err
    assert sum(line.startswith(f"mam: record {ws.jobs / 'job-d.json'} is damaged (") for line in said) == 1, err
    assert all(line.endswith("): run `mam rebuild`") for line in said), err

    for form in (["-o", "json"], ["-o", "name"], ["tree"]):
        code, out, err = await _mam(ws, "jobs", *form)
        assert code == 0, (form, err)
        assert "job-a" in out and "job-c" in out and "job-b" not in out, (form, out)
        assert len(_lines(err)) == 2 and all("run `mam rebuild`" in line for line in _lines(err)), (form, err)
    code, out, _ = await _mam(ws, "jobs", "--json")
    assert [r["job_id"] for r in json.loads(out)] == ["job-c", "job-a"]


async def test_jobs_says_a_planted_file_in_the_registry_and_lists_the_rest(ws: WorkspacePaths) -> None:
    write_job(ws, "job-a")
    write_job(ws, "job-b")
    code, _, err = await _mam(ws, "rebuild")
    assert code == 0, err
    os.remove(ws.jobs / "job-b.json")
    os.mkfifo(ws.jobs / "job-b.json")  # where the index names a record: not a file the projector makes
    code, out, err = await _mam(ws, "jobs")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["job-a"], out
    [line] = _lines(err)
    assert str(ws.jobs / "job-b.json") in line and line.endswith("remove it, then run `mam rebuild`"), line


async def test_jobs_of_a_sound_registry_says_nothing_on_stderr(ws: WorkspacePaths) -> None:
    write_job(ws, "job-a")
    code, out, err = await _mam(ws, "jobs")
    assert code == 0 and err == "" and out.splitlines()[1].startswith("job-a"), (out, err)
