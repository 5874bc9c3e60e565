"""mam's clients against a TLS broker with a private CA: `--cafile` (or `MAM_CAFILE`) makes the
connection, without it the failure is one line naming the CA; a host name the certificate lacks
is named as such; a broker that asks for a client certificate takes `--certfile`/`--keyfile`."""

from __future__ import annotations

import datetime
import getpass
import ipaddress
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from brokers import free_port, require_binary, stop, wait_for_port
from support import child_env, mam, run
from workspace_support import WorkspacePaths


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _issue(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    ip: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip is not None:  # the server's: only its IP address, so `localhost` is a name it does not hold
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


def private_ca(tmp: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed, as PEM files."""
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mam test CA")])
    files = {name: tmp / f"{name}.pem" for name in ("ca", "server", "server-key", "client", "client-key")}
    files["ca"].write_bytes(
        _issue("mam test CA", ca_key, ca_name, ca_key, ca=True).public_bytes(serialization.Encoding.PEM)
    )
    files["server"].write_bytes(
        _issue("broker", server_key, ca_name, ca_key, ip="127.0.0.1").public_bytes(serialization.Encoding.PEM)
    )
    files["client"].write_bytes(_issue("client", client_key, ca_name, ca_key).public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, files["server-key"])
    _write_key(client_key, files["client-key"])
    return files


@contextmanager
def tls_mosquitto(tmp: Path, pem: dict[str, Path]) -> Iterator[tuple[int, int]]:
    """mosquitto with two TLS listeners on 127.0.0.1: one (server auth only) and one that requires
    a client certificate signed by the CA (mosquitto.conf(5): cafile, certfile, keyfile and
    require_certificate are per listener)."""
    plain, mutual = free_port(), free_port()
    tls = f"cafile {pem['ca']}\ncertfile {pem['server']}\nkeyfile {pem['server-key']}\n"
    conf = tmp / "mosquitto-tls.conf"
    conf.write_text(
        f"user {getpass.getuser()}\nallow_anonymous true\nlistener {plain} 127.0.0.1\n{tls}"
        f"listener {mutual} 127.0.0.1\n{tls}require_certificate true\n"
    )
    with open(tmp / "mosquitto-tls.log", "ab") as log:
        proc = subprocess.Popen([require_binary("mosquitto"), "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(plain, proc)
        wait_for_port(mutual, proc)
        yield plain, mutual
    finally:
        stop(proc)


@pytest.mark.slow
async def test_cafile_and_client_certificates_against_a_private_ca(ws: WorkspacePaths, tmp_path: Path) -> None:
    pem = private_ca(tmp_path)
    with tls_mosquitto(tmp_path, pem) as (plain, mutual):
        env = child_env(SSL_CERT_FILE=None, SSL_CERT_DIR=None, MAM_CAFILE=None, MAM_CERTFILE=None, MAM_KEYFILE=None)

        async def agents(url: str, *flags: str, **extra: str) -> tuple[int, str]:
            result = await run(
                mam("agents", "--broker", url, "--workspace", str(ws.root), *flags),
                cwd=ws.elsewhere,
                env={**env, **extra},
            )
            return result.returncode, result.stderr.decode()

        code, err = await agents(f"mqtts://127.0.0.1:{plain}")
        assert code == 3 and err.count("\n") == 1, err
        assert "signed by a CA this machine does not trust" in err and "--cafile" in err, err

        code, err = await agents(f"mqtts://127.0.0.1:{plain}", "--cafile", str(pem["ca"]))
        assert code == 0 and "no runners" in err, err
        code, err = await agents(f"mqtts://127.0.0.1:{plain}", MAM_CAFILE=str(pem["ca"]))
        assert code == 0 and "no runners" in err, err

        code, err = await agents(f"mqtts://localhost:{plain}", "--cafile", str(pem["ca"]))
        assert code == 3 and err.count("\n") == 1 and "does not name that host" in err, err

        code, err = await agents(f"mqtts://127.0.0.1:{mutual}", "--cafile", str(pem["ca"]))
        assert code == 3 and err.count("\n") == 1 and "asked for one" in err and "--certfile" in err, err
        code, err = await agents(
            f"mqtts://127.0.0.1:{mutual}",
            "--cafile",
            str(pem["ca"]),
            "--certfile",
            str(pem["client"]),
            "--keyfile",
            str(pem["client-key"]),
        )
        assert code == 0 and "no runners" in err, err

        code, err = await agents(f"mqtts://127.0.0.1:{plain}", "--cafile", str(tmp_path / "missing.pem"))
        assert code == 2 and err.count("\n") == 1 and "missing.pem" in err, err
