"""Passwords are no lever on `mam up`: wrong-password floods, unknown users, bounded checks.

The checks are real argon2 (the hashes `mam passwd` writes), over real sockets to a real
`mam up --password-file`; attackers connect from 127.0.0.2 so the logged-in client and
`mam submit` on 127.0.0.1 are a different address, as another machine would be.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import anyio
import pytest

from mam.broker.password_check import BACKOFF_BASE, PasswordChecker, read_users
from mam.broker.passwords import set_password

from e2e import up_with_flags
from support import mam, run
from workspace_support import WorkspacePaths

ATTACKERS = 80


def connect_packet(client_id: str, user: str, password: str, keepalive: int = 60) -> bytes:
    def field(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("!H", len(raw)) + raw

    body = b"\x00\x04MQTT\x04\xc2" + struct.pack("!H", keepalive) + field(client_id) + field(user) + field(password)
    return bytes([0x10, len(body)]) + body


async def connack(
    port: int, user: str, password: str, *, source: str, client_id: str
) -> tuple[anyio.abc.SocketStream, bytes]:
    """Connect from `source`, send CONNECT, return the stream and the CONNACK's return code (b'' if closed first)."""
    stream = await anyio.connect_tcp("127.0.0.1", port, local_host=source)
    await stream.send(connect_packet(client_id, user, password))
    received = b""
    try:
        while len(received) < 4:
            received += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
        pass
    return stream, received[3:4]


async def ping(stream: anyio.abc.SocketStream) -> float:
    """One PINGREQ/PINGRESP round trip, in seconds."""
    start = time.monotonic()
    await stream.send(b"\xc0\x00")
    assert await stream.receive() == b"\xd0\x00"
    return time.monotonic() - start


async def submit(ws: WorkspacePaths, url: str) -> float:
    start = time.monotonic()
    result = await run(
        mam("submit", "--prompt", "p", "--agent", "a", "--workspace", str(ws.root), "--broker", url), cwd=ws.elsewhere
    )
    assert result.returncode == 0, result.stderr
    return time.monotonic() - start


@pytest.mark.slow  # 6-7 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_a_wrong_password_flood_leaves_pings_and_submits_their_normal_times(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    passwd = tmp_path / "passwd"
    set_password(passwd, "bob", "pw")
    set_password(passwd, "alice", "s3cret")
    async with up_with_flags(ws, "--password-file", str(passwd), login="bob:pw") as (port, _):
        url = f"mqtt://bob:pw@127.0.0.1:{port}"
        # user names do not leak: an unknown user's refusal costs what a known user's does
        took = {}
        for user, source in (("alice", "127.0.0.3"), ("nobody", "127.0.0.4")):
            start = time.monotonic()
            stream, code = await connack(port, user, "wrong", source=source, client_id=f"probe-{user}")
            took[user] = time.monotonic() - start
            await stream.aclose()
            assert code == b"\x05", (user, code)
        assert took["nobody"] > took["alice"] / 4, took

        stream, code = await connack(port, "bob", "pw", source="127.0.0.1", client_id="logged-in")
        assert code == b"\x00"
        baseline_ping = max([await ping(stream) for _ in range(5)])
        baseline_submit = await submit(ws, url)

        refused = 0

        async def attack(n: int) -> None:
            nonlocal refused
            while True:
                s, c = await connack(port, "alice", f"guess-{n}", source="127.0.0.2", client_id=f"attacker-{n}")
                await s.aclose()
                assert c in (b"\x05", b""), c
                refused += 1

        async with anyio.create_task_group() as tg:
            for n in range(ATTACKERS):
                tg.start_soon(attack, n)
            with anyio.fail_after(30):
                while refused < ATTACKERS:  # every attacker has been answered once: the flood is on
                    await anyio.sleep(0.05)  # polling the attackers' own count
            before = refused
            pings = []
            for _ in range(10):
                pings.append(await ping(stream))
                await anyio.sleep(0.1)  # the pings' pace: the stimulus, not a synchronisation
            flood_submit = await submit(ws, url)
            pings.append(await ping(stream))
            during = refused - before
            tg.cancel_scope.cancel()
        await stream.aclose()
    print(
        f"ping {baseline_ping:.3f} s -> {max(pings):.3f} s under the flood; mam submit {baseline_submit:.2f} s -> "
        f"{flood_submit:.2f} s; {during} refusals meanwhile; known/unknown user refused in "
        f"{took['alice']:.3f}/{took['nobody']:.3f} s"
    )
    assert during > 0, during  # the attackers kept coming (throttled) while we measured
    assert max(pings) < 1.0, pings
    assert flood_submit < baseline_submit * 3 + 2, (baseline_submit, flood_submit)


async def test_unknown_users_are_checked_against_a_dummy_hash_and_checks_are_bounded(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    set_password(passwd, "alice", "s3cret")
    stored = read_users(passwd)["alice"]
    checker = PasswordChecker.from_file(passwd)
    params = stored.split("$")[:4]
    assert checker.dummy.split("$")[:4] == params and checker.dummy != stored  # same argon2 parameters

    assert await checker.check("alice", "s3cret", "10.0.0.3")
    assert checker.verified == 1
    assert not await checker.check("nobody", "x", "10.0.0.1")
    assert checker.verified == 2  # the dummy was verified, as a known user's hash would be
    assert not await checker.check("alice", "x", "10.0.0.2")
    assert checker.verified == 3

    # many users from many addresses at once: never more than the limiter's checks, the loop stays free
    most = 0
    lag = 0.0

    async def watch() -> None:
        nonlocal most, lag
        while True:
            start = time.monotonic()
            await anyio.sleep(0.01)  # a measurement of the event loop's lag, not a wait
            lag = max(lag, time.monotonic() - start - 0.01)
            most = max(most, checker.limiter.borrowed_tokens)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        async with anyio.create_task_group() as attempts:
            for n in range(8):
                attempts.start_soon(checker.check, f"user-{n}", "wrong", f"10.1.0.{n}")
        tg.cancel_scope.cancel()
    assert checker.verified == 11
    assert most == checker.limiter.total_tokens == 2, most
    assert lag < 0.2, lag


async def test_a_failed_check_backs_off_its_address_and_user_and_a_success_clears_them(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    set_password(passwd, "alice", "s3cret")
    checker = PasswordChecker.from_file(passwd)
    assert not await checker.check("alice", "wrong", "10.0.0.1")
    assert checker.by_user["alice"].count == checker.by_address["10.0.0.1"].count == 1
    # a typo then the right password: it waits out the window, is checked, and clears the back-off
    start = time.monotonic()
    assert await checker.check("alice", "s3cret", "10.0.0.1")
    assert time.monotonic() - start >= BACKOFF_BASE * 0.9
    assert "alice" not in checker.by_user and "10.0.0.1" not in checker.by_address
    assert checker.verified == 2

    assert not await checker.check("alice", "wrong", "10.0.0.2")
    checked = checker.verified
    # ten concurrent guesses for a backed-off user: one check between them, the rest refused unchecked
    answers: list[bool] = []

    async def guess(n: int) -> None:
        answers.append(await checker.check("alice", f"guess-{n}", f"10.2.0.{n}"))

    async with anyio.create_task_group() as tg:
        for n in range(10):
            tg.start_soon(guess, n)
    assert answers == [False] * 10
    assert checker.verified - checked == 1, checker.verified - checked
    assert checker.by_user["alice"].count == 2
