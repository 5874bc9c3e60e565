"""The CLI's kubectl and git habits (issue 24): global options in either position, writes that need
4 characters of an id, several jobs and selectors for cancel/retry, `mam wait`, `logs --tail
--timestamps`, `jobs -o wide`/`--sort-by`/`tree ROOT`, shell completion."""

from __future__ import annotations

import json

from conftest import WorkspacePaths
from e2e import write_job
from support import mam, run


async def _mam(ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    done = await run(mam(*args), cwd=ws.elsewhere)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_global_options_work_before_or_after_the_subcommand(ws: WorkspacePaths) -> None:
    write_job(ws, "job-one")
    root = str(ws.root)
    spellings = [
        ("--workspace", root, "jobs", "--json"),
        ("jobs", "--workspace", root, "--json"),
        ("--json", "--workspace", root, "jobs"),
        ("--workspace", root, "--json", "-v", "jobs"),
    ]
    outputs = []
    for spelling in spellings:
        code, out, err = await _mam(ws, *spelling)
        assert code == 0, (spelling, err)
        outputs.append([r["job_id"] for r in json.loads(out)])
    assert outputs == [["job-one"]] * len(spellings)
    code, out, _ = await _mam(ws, "--workspace", root, "show", "one")
    assert code == 0 and "job-one" in out
    # a flag the command does not take is refused before it, as after it
    code, _, err = await _mam(ws, "--broker", "mqtt://127.0.0.1:9", "schema")
    assert code == 2 and err.strip() == "mam: error: --broker: `mam schema` does not take it"
    code, _, err = await _mam(ws, "--json", "passwd", str(ws.elsewhere / "pw"), "u")
    assert code == 2 and "--json" in err and not (ws.elsewhere / "pw").exists()
    # a broker URL of the wrong scheme is a usage error, also for a command that reads only files
    for spelling in (("jobs", "--broker", "http://foo"), ("--broker", "http://foo", "jobs")):
        code, out, err = await _mam(ws, "--workspace", root, *spelling)
        assert code == 2 and "'http://foo'" in err and err.count("\n") == 1 and out == ""


async def test_workspace_keys_and_values_stay_apart(ws: WorkspacePaths) -> None:
    code, out, err = await _mam(ws, "workspace", "--workspace", str(ws.root), "--broker", "mqtt://127.0.0.1:9")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("broker_unreachable"))
    assert line.startswith("broker_unreachable cannot reach"), line
