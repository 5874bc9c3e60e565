"""The journal (projector/journal.py, journal_apply.py): a batch is one frame; applying its entry again,
whole or after a crash cut an apply short, leaves the bytes an uninterrupted apply leaves."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.projector.audit_log import AuditLog
from mam.projector.journal import (
    JOURNAL_DIR,
    Append,
    Entry,
    Journal,
    JournalRefused,
    Remove,
    Replace,
    decode,
    encode,
)
from mam.projector.journal_apply import Applier, recover, replay
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList

pytestmark = pytest.mark.fast

JOBS = ("j-1", "j-2", "j-3")


def applier(root: Path) -> Applier:
    return Applier(AuditLog(root / "logs"), Registry(root / "jobs"), DirtyList(root / "jobs"), None)


def tree(root: Path) -> dict[str, bytes]:
    """Every file the journal's operations write (temp files, the dirty list and the journal left out)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.name.startswith(".") and JOURNAL_DIR not in rel:
            found[rel] = path.read_bytes()
    return found


@st.composite
def batches(draw: st.DrawFn) -> list[Entry]:
    """Entries as the projector makes them: appends at each file's length so far, records and parked
    files replaced, parked files removed."""
    sizes: dict[str, int] = {}
    entries = []
    for _ in range(draw(st.integers(1, 5))):
        ops: list[Append | Replace | Remove] = []
        for job in draw(st.lists(st.sampled_from(JOBS), max_size=3, unique=True)):
            lines = draw(
                st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ") + b"\n"), min_size=1, max_size=3)
            )
            path = f"{job}/events.jsonl"
            ops.append(Append("logs", path, sizes.get(path, 0), b"".join(lines)))
            sizes[path] = sizes.get(path, 0) + len(ops[-1].data)  # type: ignore[union-attr]
            ops.append(Replace("registry", f"{job}.json", draw(st.binary(max_size=60))))
        if draw(st.booleans()):
            job = draw(st.sampled_from(JOBS))
            ops.append(
                draw(
                    st.sampled_from(
                        [
                            Replace("logs", f"_parked/{job}.jsonl", b"parked\n"),
                            Remove("logs", f"_parked/{job}.jsonl"),
                        ]
                    )
                )
            )
        entries.append(Entry(list(ops)))
    return entries


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=batches(), data=st.data())
def test_replay_after_any_crash_point_gives_the_bytes_of_one_uninterrupted_apply(
    tmp_path_factory: pytest.TempPathFactory, entries: list[Entry], data: st.DataObject
) -> None:
    once, crashed = tmp_path_factory.mktemp("once"), tmp_path_factory.mktemp("crashed")
    for entry in entries:
        applier(once).apply(entry)
    # A crash in entry k, after `cut` of its operations, the last one torn at byte `torn`; the checkpoint
    # had covered the entries before `covered`, so a restart replays from there.
    k = data.draw(st.integers(0, len(entries) - 1), "crashed in entry")
    covered = data.draw(st.integers(0, k), "checkpoint covered")
    first = applier(crashed)
    for entry in entries[:k]:
        first.apply(entry)
    ops = entries[k].ops
    cut = data.draw(st.integers(0, len(ops)), "operations applied")
    if cut:
        first.apply(Entry(ops[: cut - 1]))
        last = ops[cut - 1]
        if isinstance(last, Append):
            torn = data.draw(st.integers(0, len(last.data)), "bytes of the last append written")
            first.apply(Entry([Append(last.root, last.path, last.offset, last.data[:torn])]))
        else:
            first.apply(Entry([last]))
    count, _, _ = replay(entries[covered:], applier(crashed))
    assert count == len(entries) - covered
    assert tree(crashed) == tree(once)


def test_a_frame_cut_at_any_byte_ends_the_journal_before_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "jobs")
    journal.start()
    entries = [Entry([Append("logs", "j-1/events.jsonl", n * 3, b"ab\n")]) for n in range(3)]
    for entry in entries:
        journal.append(entry)
    journal.close()
    (segment,) = (tmp_path / "jobs" / JOURNAL_DIR).iterdir()
    whole = segment.read_bytes()
    frame = len(encode(entries[0]))
    for size in range(len(whole) + 1):
        segment.write_bytes(whole[:size])
        assert list(Journal(tmp_path / "jobs").read()) == entries[: size // frame], size


def test_a_frame_failing_its_checksum_ends_the_journal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = Journal(tmp_path / "jobs")
    journal.start()
    entries = [Entry([Replace("registry", f"j-{n}.json", b"{}\n")]) for n in range(3)]
    for entry in entries:
        journal.append(entry)
    journal.close()
    (segment,) = (tmp_path / "jobs" / JOURNAL_DIR).iterdir()
    data = bytearray(segment.read_bytes())
    data[len(encode(entries[0])) + 12] ^= 0xFF  # inside the second frame's payload
    segment.write_bytes(bytes(data))
    assert list(Journal(tmp_path / "jobs").read()) == entries[:1]
    assert "failing its checksum" in caplog.text


@given(
    st.sampled_from(["registry", "logs"]),
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            ["../x.json", "j-1/../../x", "/etc/passwd", "_parked/../x.jsonl", "j-1/other.txt", ".projector.lock", "j-1"]
        ),
    ),
)
def test_an_entry_naming_another_file_is_refused(root: str, path: str) -> None:
    allowed = (root == "registry" and path in {f"{j}.json" for j in JOBS}) or (
        root == "logs" and path in {"_rejected.jsonl", *(f"{j}/events.jsonl" for j in JOBS)}
    )
    payload = msgspec.msgpack.encode(Entry([Replace(root, path, b"x")]))  # type: ignore[arg-type]
    if allowed:
        assert decode(payload).ops[0].path == path  # type: ignore[union-attr]
    else:
        with pytest.raises((JournalRefused, msgspec.ValidationError)):
            decode(payload)


def test_a_planted_entry_writes_nothing_outside(tmp_path: Path) -> None:
    """A job that writes a well-framed entry into the journal cannot make the projector write elsewhere."""
    journal = Journal(tmp_path / "ws" / "jobs")
    journal.start()
    journal.append(Entry([Append("logs", "j-1/events.jsonl", 0, b"ok\n")]))
    journal.close()
    payload = msgspec.msgpack.encode(
        {"ops": [{"type": "replace", "root": "logs", "path": "../../escaped", "data": b"x"}]}
    )
    (segment,) = (tmp_path / "ws" / "jobs" / JOURNAL_DIR).iterdir()
    with segment.open("ab") as f:
        f.write(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
    ws = tmp_path / "ws"
    assert recover(Journal(ws / "jobs"), applier(ws)) == 1
    assert not (tmp_path / "escaped").exists() and not (ws / "escaped").exists()
    assert (ws / "logs" / "j-1" / "events.jsonl").read_bytes() == b"ok\n"
    assert [p.stat().st_size for p in (ws / "jobs" / JOURNAL_DIR).iterdir()] == [0], "one new, empty segment"


def test_recover_leaves_one_empty_segment_and_the_jobs_listed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    journal = Journal(ws / "jobs")
    journal.start()
    journal.append(Entry([Append("logs", "j-1/events.jsonl", 0, b"a\n"), Replace("registry", "j-1.json", b"{}\n")]))
    journal.append(Entry([Append("logs", "j-1/events.jsonl", 2, b"b\n")]))
    journal.close()
    assert recover(Journal(ws / "jobs"), applier(ws)) == 2
    assert (ws / "logs" / "j-1" / "events.jsonl").read_bytes() == b"a\nb\n"
    assert DirtyList(ws / "jobs").read() == ["j-1"], "crash repair and the index look at the replayed jobs"
    assert recover(Journal(ws / "jobs"), applier(ws)) == 0, "nothing twice"
    assert [p.stat().st_size for p in (ws / "jobs" / JOURNAL_DIR).iterdir()] == [0]
    assert os.stat(ws / "jobs" / JOURNAL_DIR).st_mode & 0o077 == 0, "private, as every dir under .mam/"


def test_a_checkpoint_trims_what_was_applied_and_never_an_entry_whose_apply_failed(tmp_path: Path) -> None:
    from mam.projector.checkpoint import Checkpointer

    ws = tmp_path / "ws"
    journal = Journal(ws / "jobs")
    recover(journal, applier(ws))
    checkpointer = Checkpointer(journal, AuditLog(ws / "logs"), Registry(ws / "jobs"))
    entry = Entry([Append("logs", "j-1/events.jsonl", 0, b"a\n")])
    with journal.lock:
        journal.append(entry)
        journal.pending = True  # its apply failed: the committer tries it again
    assert not checkpointer.checkpoint(), "no seal while an entry waits for its apply"
    assert list(Journal(ws / "jobs").read()) == [entry]
    applier(ws).apply(entry)
    journal.pending = False
    assert checkpointer.checkpoint() and checkpointer.checkpoints == 1
    assert list(Journal(ws / "jobs").read()) == [], "applied, made durable, trimmed"
    assert not checkpointer.checkpoint(), "nothing new"
    checkpointer.now()  # nothing new: the last trim made durable, no error
    checkpointer.close()
    assert [p.stat().st_size for p in (ws / "jobs" / JOURNAL_DIR).iterdir()] == [0]
