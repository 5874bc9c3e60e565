"""What completion offers, as values (issue 43): job ids by their start or their short id, every offer resolving
to the one job `mam show` would take it for (generated ids, colliding short ids and hand-named ids, from
hypothesis); and the completers that read a file beside the registry (the set-aside file, the runtime file, a
password file), each answering nothing rather than a trace when the file is missing or damaged."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mam.cli.completers import COMPLETERS
from mam.cli.id_completion import id_forms, listed_forms, short_id
from mam.contract.broker_url import DEFAULT_BROKER_URL
from mam.contract.errors import MamError
from mam.registry.query import resolve_job_id
from mam.registry.set_aside_file import SET_ASIDE_FILE, SHORT_ID, digest

from workspace_support import WorkspacePaths

_GENERATED = st.builds(
    lambda day, hexes: f"job-202601{day:02d}-120000-{hexes}", st.integers(1, 28), st.text("a5f", min_size=6, max_size=6)
)
"""Generated ids from a 3-letter alphabet, so short ids collide often."""
_NAMED = st.text("a5f-j", min_size=1, max_size=8).filter(lambda t: t[0] != "-")
"""Hand-named ids (`--job-id`), some of them starting with (or being) another job's short id."""
IDS = st.lists(st.one_of(_GENERATED, _NAMED), min_size=1, max_size=12, unique=True)


@pytest.mark.fast
@given(IDS, st.data())
def test_every_offer_starts_with_the_word_and_resolves_to_its_job(ids: list[str], data: st.DataObject) -> None:
    typed = data.draw(
        st.one_of(
            st.text("a5fj-", max_size=4),
            st.sampled_from(ids).map(lambda i: i[: len(i) // 2]),
            st.sampled_from(ids).map(lambda i: i[-6:-3]),
        )
    )
    offers = id_forms(ids, typed)
    for offer, whole in offers.items():
        assert offer.startswith(typed)
        assert resolve_job_id(offer, ids) == (whole or offer)  # what `mam show OFFER` would show
    for job in ids:  # nothing is missed: a job whose id or sure short id starts with the word is offered
        short = short_id(job)
        if short is not None and short.startswith(typed) and _resolved(short, ids) == job:
            assert offers[short] == job
        if typed and job.startswith(typed):
            assert offers[job] == ""


def _resolved(text: str, ids: list[str]) -> str | None:
    try:
        return resolve_job_id(text, ids)
    except MamError:
        return None


@pytest.mark.fast
@given(IDS)
def test_with_nothing_typed_each_job_is_offered_once_by_its_shortest_sure_form(ids: list[str]) -> None:
    offers = id_forms(ids, "")
    reached = [whole or offer for offer, whole in offers.items()]
    assert sorted(reached) == sorted(ids)
    for offer, whole in offers.items():
        assert not whole or short_id(whole) == offer


@pytest.mark.fast
def test_short_ids_are_what_every_message_shows_and_a_shared_one_falls_back_to_the_whole_id() -> None:
    ids = ["job-20260101-000100-5732ef", "job-20260101-000200-57a1b2", "kid-job"]
    assert id_forms(ids, "57") == {"5732ef": ids[0], "57a1b2": ids[1]}
    assert id_forms(ids, "job-20260101-0001") == {ids[0]: ""}
    assert id_forms(ids, "") == {"5732ef": ids[0], "57a1b2": ids[1], "kid-job": ""}
    twins = ["job-20260101-000100-5732ef", "job-20260102-000100-5732ef"]
    assert id_forms(twins, "5732") == {}  # `mam show 5732ef` would be ambiguous
    assert id_forms(twins, "") == {twins[0]: "", twins[1]: ""}
    assert id_forms(["job-20260101-000100-5732ef", "5732ef-notes"], "") == {
        "job-20260101-000100-5732ef": "",
        "5732ef-notes": "",
    }  # the id that starts with it would win


@pytest.mark.fast
def test_a_list_of_ids_completes_its_last_one_and_leaves_out_those_given() -> None:
    ids = ["job-20260101-000100-5732ef", "job-20260101-000200-57a1b2"]
    assert listed_forms(ids, "5732ef,57") == {"5732ef,57a1b2": ids[1]}
    assert listed_forms(ids, "57") == {"5732ef": ids[0], "57a1b2": ids[1]}


def _args(ws: WorkspacePaths, **more: object) -> argparse.Namespace:
    return argparse.Namespace(workspace=str(ws.root), **more)


@pytest.mark.fast
def test_set_aside_ids_complete_by_the_short_id_mam_set_aside_shows(ws: WorkspacePaths) -> None:
    complete = COMPLETERS["set-aside"]
    assert complete(prefix="", parsed_args=_args(ws)) == []  # no file yet
    ws.logs.mkdir(parents=True, exist_ok=True)
    entry = {
        "set_aside_at": "2026-01-01T00:00:00Z",
        "topic": "mam/w/jobs/j/events",
        "reason": "RuntimeError: x",
        "attempts": 1,
        "first_at": "2026-01-01T00:00:00Z",
        "payload_bytes": 2,
        "payload": "{}",
    }
    full = digest("mam/w/jobs/j/events", b"{}")
    (ws.logs / SET_ASIDE_FILE).write_text(json.dumps({**entry, "id": full}) + "\nnot json\n")
    assert complete(prefix="", parsed_args=_args(ws)) == [full[:SHORT_ID]]
    assert complete(prefix=full[:3], parsed_args=_args(ws)) == [full[:SHORT_ID]]
    assert complete(prefix="zz", parsed_args=_args(ws)) == []


@pytest.mark.fast
def test_broker_offers_the_workspace_s_broker_without_its_password_and_the_default(ws: WorkspacePaths) -> None:
    complete = COMPLETERS["broker"]
    assert complete(prefix="", parsed_args=_args(ws)) == [DEFAULT_BROKER_URL]
    runtime = ws.root / ".mam" / "runtime.json"
    runtime.parent.mkdir(parents=True, exist_ok=True)
    runtime.write_text(
        json.dumps(
            {
                "broker": "mqtt://127.0.0.1:28830",
                "pid": 1,
                "host": "elsewhere",
                "workspace": "w",
                "started_at": "2026-01-01T00:00:00Z",
                "served_by": "mam up",
            }
        )
    )
    assert complete(prefix="", parsed_args=_args(ws)) == ["mqtt://127.0.0.1:28830", DEFAULT_BROKER_URL]
    assert complete(prefix="mqtt://127.0.0.1:2", parsed_args=_args(ws)) == ["mqtt://127.0.0.1:28830"]
    runtime.write_text("{damaged")
    assert complete(prefix="", parsed_args=_args(ws)) == [DEFAULT_BROKER_URL]


@pytest.mark.fast
def test_workspace_id_offers_the_workspace_s_own(ws: WorkspacePaths) -> None:
    from mam.contract.workspace import resolve

    assert COMPLETERS["workspace-id"](prefix="", parsed_args=_args(ws)) == [resolve(workspace=ws.root, env={}).id]


@pytest.mark.fast
def test_passwd_users_come_from_the_file_named_before(tmp_path: Path) -> None:
    complete = COMPLETERS["user"]
    passwords = tmp_path / "pw"
    passwords.write_text("# users\nkim:$7$hash\nkeith:$7$hash\nkim:$7$again\n\x00\xff:x\n", encoding="latin-1")
    assert complete(prefix="k", parsed_args=argparse.Namespace(file=passwords)) == ["kim", "keith"]
    assert complete(prefix="", parsed_args=argparse.Namespace(file=tmp_path / "missing")) == []
    assert complete(prefix="", parsed_args=argparse.Namespace(file=tmp_path)) == []  # a directory
    assert complete(prefix="", parsed_args=argparse.Namespace()) == []


def test_free_values_offer_nothing_and_paths_offer_names(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("")
    (tmp_path / "nested").mkdir()
    assert COMPLETERS["free"](prefix=str(tmp_path / "n")) == []
    assert sorted(COMPLETERS["file"](prefix=str(tmp_path / "n"))) == [
        str(tmp_path / "nested") + "/",
        str(tmp_path / "notes"),
    ]
    assert COMPLETERS["dir"](prefix=str(tmp_path / "n")) == [str(tmp_path / "nested") + "/"]
