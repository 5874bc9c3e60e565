"""The Python API's public face (issue 44, part 6): `from mam import Publisher`, `submit(JobSpec(...))` typed by
`wait` (a job id, or with `wait=True` its record), the keyword form kept working, against a real `mam up`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import get_type_hints

import pytest

from mam.agents.submit_keywords import SubmitKeywords
from mam.contract.broker_url import parse_broker_url
from mam.contract.errors import UsageError
from mam.contract.job_spec import JobSpec
from mam.contract.record import JobRecord, Status
from mam.contract.workspace import resolve

from brokers import free_port
from e2e import up_process, workspace_id
from support import CHECKOUT, wait_for_state
from workspace_support import WorkspacePaths


@pytest.mark.fast
def test_the_keyword_form_takes_exactly_the_job_specs_options() -> None:
    assert list(get_type_hints(SubmitKeywords)) == list(JobSpec.__struct_fields__)
    assert SubmitKeywords.__required_keys__ == {"prompt", "agent"}


_LOADED = "import json, sys, mam; print(json.dumps(sorted(m for m in sys.modules if m.startswith('mam.'))))"


def test_publisher_is_a_name_of_mam_and_still_of_mam_agents() -> None:
    import mam
    import mam.agents

    assert mam.Publisher is mam.agents.Publisher
    assert "Publisher" in mam.__all__ and "Publisher" in dir(mam)
    done = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == [], "`import mam` loads the publisher only when a program names it"


async def test_submit_takes_a_job_spec_or_keywords_and_returns_an_id_or_the_record(ws: WorkspacePaths) -> None:
    from mam import Publisher

    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            record = await pub.submit(JobSpec(prompt="p", agent="nobody", job_id="spec-wait", max_turns=3), wait=True)
            assert isinstance(record, JobRecord) and record.job_id == "spec-wait" and record.max_turns == 3
            assert record.status is Status.SUBMITTED
            job_id = await pub.submit(JobSpec(prompt="p", agent="nobody", job_id="spec-nowait", priority=5))
            assert job_id == "spec-nowait"
            by_keywords = await pub.submit(prompt="p", agent="nobody", job_id="kw-wait", priority=7, wait=True)
            assert isinstance(by_keywords, JobRecord) and by_keywords.priority == 7
            assert await pub.submit(prompt="p", agent="nobody", job_id="kw-nowait") == "kw-nowait"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                old = await pub.submit(prompt="p", agent="nobody", job_id="kw-old", timeout=60.0, wait=True)
            assert old.timeout == 60.0 and [w.category for w in caught] == [DeprecationWarning]
            assert caught[0].filename == __file__, "the warning points at the caller's line"
            assert await pub.submit_spec(JobSpec(prompt="p", agent="nobody", job_id="old-name")) == "old-name"

            with pytest.raises(UsageError, match="not both.*max_turns"):
                await pub.submit(JobSpec(prompt="p", agent="nobody"), max_turns=3)  # type: ignore[call-overload]
            with pytest.raises(UsageError, match="max_turn"):
                await pub.submit(prompt="p", agent="nobody", max_turn=3)  # type: ignore[call-overload]
            with pytest.raises(TypeError, match="JobSpec or keywords, not str"):
                await pub.submit("p")  # type: ignore[call-overload]
        for job in ("spec-nowait", "kw-nowait", "old-name"):  # published without waiting, recorded all the same
            await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] == "submitted", timeout=20)


def _typecheck_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck", CHECKOUT / ".ci" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TYPED = """
from typing import assert_type

from mam import JobRecord, Publisher
from mam.contract.job_spec import JobSpec


async def typed(pub: Publisher, spec: JobSpec, flag: bool) -> None:
    assert_type(await pub.submit(spec), str)
    assert_type(await pub.submit(spec, wait=False), str)
    assert_type(await pub.submit(spec, wait=True), JobRecord)
    assert_type(await pub.submit(spec, wait=flag), str | JobRecord)
    assert_type(await pub.submit(prompt="p", agent="a"), str)
    assert_type(await pub.submit(prompt="p", agent="a", max_turns=2, wait=True, wait_timeout=5.0), JobRecord)
    assert_type(await pub.submit(prompt="p", agent="a", wait=flag), str | JobRecord)
"""
WRONG = """
from mam import Publisher
from mam.contract.job_spec import JobSpec


async def wrong(pub: Publisher, spec: JobSpec) -> None:
    await pub.submit(prompt="p", agent="a", max_turn=2)
    await pub.submit(agent="a")
    await pub.submit(spec, prompt="p")
    (await pub.submit(spec)).status
"""


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_mypy_knows_what_submit_returns_from_wait(tmp_path: Path) -> None:
    typed, wrong = tmp_path / "typed_submit.py", tmp_path / "wrong_submit.py"
    typed.write_text(TYPED)
    wrong.write_text(WRONG)
    typecheck = _typecheck_module()
    tree = tmp_path / "installed"  # mam laid out as installed, as .ci/typecheck.py does for `-p mam`
    typecheck.lay_out(typecheck.package_dirs(CHECKOUT / "setup.py"), tree)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(CHECKOUT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(typed),
            str(wrong),
        ],
        cwd=tree,
        env={**os.environ, "MYPYPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if "typed_submit.py" in line], done.stdout + done.stderr
    assert {int(line.split(":")[1]) for line in errors if "wrong_submit.py" in line} == {7, 8, 9, 10}, (
        done.stdout + done.stderr
    )
