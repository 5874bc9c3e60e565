"""The signed-state format and the projector's key (`mam.contract.signing`, `projector/signer.py`):
a state verifies to its canonical bytes, any tampering fails, a reader takes only its own topic's
record, and the key pair is made once, private key 0600, never read through a link.
(What runners and followers do with forged states: test_signed_states.py.)
"""

from __future__ import annotations

import stat
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from signing_support import record

from mam.contract.errors import MamError
from mam.contract.record import JobRecord, encode_record
from mam.contract.signing import (
    BadSignature,
    StateReader,
    fingerprint,
    key_path,
    load_workspace_key,
    public_key_path,
    sign_payload,
    verify_payload,
)
from mam.contract.topics import Topics
from mam.contract.workspace import resolve
from mam.projector.signer import load_or_create
from mam.registry.runtime import runtime_path

pytestmark = pytest.mark.fast

# -- the payload format ---------------------------------------------------------------------------------------------


KEY = Ed25519PrivateKey.generate()


def test_a_signed_state_verifies_to_its_canonical_bytes_and_decodes_like_the_record() -> None:
    canonical = encode_record(record())
    payload = sign_payload(canonical, KEY)
    assert payload.startswith(canonical[:-2] + b',"signature":"') and payload.endswith(b'"}\n')
    assert verify_payload(payload, KEY.public_key()) == canonical
    assert msgspec.json.decode(payload)["signature"], "the payload is still one JSON object"
    assert msgspec.json.decode(payload, type=JobRecord) == record(), "readers that ignore signatures still work"


def test_a_prompt_that_mimics_the_signature_member_does_not_confuse_the_cut() -> None:
    fake = ',"signature":"' + "A" * 86 + '"}\n'
    canonical = encode_record(record(prompt=fake))
    assert verify_payload(sign_payload(canonical, KEY), KEY.public_key()) == canonical


def test_every_tampered_byte_fails_verification() -> None:
    payload = sign_payload(encode_record(record()), KEY)
    for at in range(len(payload)):
        tampered = bytearray(payload)
        tampered[at] ^= 0x01
        with pytest.raises(BadSignature):
            verify_payload(bytes(tampered), KEY.public_key())


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (encode_record(record()), "no signature"),
        (sign_payload(encode_record(record()), Ed25519PrivateKey.generate()), "does not verify"),
        (sign_payload(encode_record(record()), KEY)[:-3] + b'=="}\n', "no signature"),
        (b"", "no signature"),
    ],
    ids=["unsigned", "another-key", "padded", "empty"],
)
def test_an_unsigned_or_foreign_payload_fails_verification(payload: bytes, why: str) -> None:
    with pytest.raises(BadSignature, match=why):
        verify_payload(payload, KEY.public_key())


@given(st.binary(max_size=600))
def test_verify_refuses_arbitrary_bytes_with_bad_signature_only(data: bytes) -> None:
    with pytest.raises(BadSignature):
        verify_payload(data, KEY.public_key())


@given(st.text(max_size=200), st.integers(min_value=0, max_value=10_000))
def test_any_record_round_trips(prompt: str, version: int) -> None:
    canonical = encode_record(record(prompt=prompt, version=version))
    assert verify_payload(sign_payload(canonical, KEY), KEY.public_key()) == canonical


def test_a_reader_takes_only_the_record_of_its_topic_and_warns_once_per_job() -> None:
    warned: list[tuple[str, str]] = []
    reader = StateReader("ws-1", KEY.public_key(), warn=lambda job, why: warned.append((job, why)))
    topics = Topics("ws-1")
    a = sign_payload(encode_record(record("job-a")), KEY)
    assert reader.record(topics.state("job-a"), a) == record("job-a")
    assert reader.record(topics.state("job-b"), a) is None
    assert reader.record(topics.state("job-b"), a) is None
    other_ws = sign_payload(encode_record(record("job-c", workspace="ws-2")), KEY)
    assert reader.record(topics.state("job-c"), other_ws) is None
    assert reader.record(topics.state("job-d"), encode_record(record("job-d"))) is None
    assert [job for job, _ in warned] == ["job-b", "job-c", "job-d"], "one warning per job, not per message"
    assert "for job 'job-a'" in warned[0][1] and "workspace 'ws-2'" in warned[1][1] and warned[2][1] == "no signature"
    assert reader.record(topics.events("job-a"), a) is None and reader.record(topics.state("job-a"), b"") is None


def test_without_a_key_a_reader_takes_states_as_they_come() -> None:
    reader = StateReader("ws-1", None, warn=lambda job, why: pytest.fail("no key, no warning"))
    assert reader.record(Topics("ws-1").state("job-1"), encode_record(record())) == record()


# -- the key pair on disk -------------------------------------------------------------------------------------------


def test_the_key_pair_is_made_once_private_key_0600_and_kept(tmp_path: Path) -> None:
    workspace = resolve(workspace=tmp_path, env={})
    key, made = load_or_create(workspace)
    again, made_again = load_or_create(workspace)
    assert made and not made_again and fingerprint(again.public_key()) == fingerprint(key.public_key())
    assert stat.S_IMODE(key_path(workspace).stat().st_mode) == 0o600
    assert key_path(workspace).parent == workspace.registry_dir.parent == tmp_path / ".mam"
    assert fingerprint(load_workspace_key(workspace)) == fingerprint(key.public_key())  # type: ignore[arg-type]


def test_a_link_or_a_readable_private_key_stops_the_projector_with_one_line(tmp_path: Path) -> None:
    workspace = resolve(workspace=tmp_path, env={})
    load_or_create(workspace)
    path = key_path(workspace)
    path.chmod(0o644)
    with pytest.raises(MamError, match=r"others may read it \(mode 0644\): `chmod 600` it"):
        load_or_create(workspace)
    path.rename(tmp_path / "elsewhere.key")
    path.symlink_to(tmp_path / "elsewhere.key")
    with pytest.raises(MamError, match="cannot use the projector's signing key .*projector.key"):
        load_or_create(workspace)


def test_the_key_files_sit_beside_the_registry_dir_like_the_runtime_file(tmp_path: Path) -> None:
    workspace = resolve(workspace=tmp_path, registry=tmp_path / "elsewhere" / "jobs", env={})
    assert key_path(workspace) == tmp_path / "elsewhere" / "projector.key"
    assert public_key_path(workspace) == tmp_path / "elsewhere" / "projector.pub"
    assert key_path(workspace).parent == runtime_path(workspace).parent
