"""TLS for mam's own clients: a private CA (`--cafile`, `MAM_CAFILE`) and a client certificate
(`--certfile`/`--keyfile`, `MAM_CERTFILE`/`MAM_KEYFILE`) for `mqtts://` brokers.

The flags ride on every `--broker` (`mam.process.options.add_broker_arg`) and are kept as the
environment variables, so every connection the process makes (the dashboard's hub, the MCP
server's, a runner's) and every mam process it starts use the same files. A file that cannot be
read is a usage error naming it (exit 2); a handshake that fails is one line saying what failed
(`describe_failure`): the CA, the host name, or the client certificate.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mam.contract.errors import UsageError

if TYPE_CHECKING:
    import ssl

ENV_CAFILE = "MAM_CAFILE"
ENV_CERTFILE = "MAM_CERTFILE"
ENV_KEYFILE = "MAM_KEYFILE"
_FLAGS = {ENV_CAFILE: "--cafile", ENV_CERTFILE: "--certfile", ENV_KEYFILE: "--keyfile"}


def _readable(path: str, source: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise UsageError(f"{source} {path!r}: no such readable file")
    return path


def client_context(env: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The system's trusted CAs plus `MAM_CAFILE`'s, and `MAM_CERTFILE`/`MAM_KEYFILE` as the client
    certificate (mTLS; a certfile that holds its key needs no keyfile). Host names are checked."""
    import ssl  # here, not at the top: the TLS flags ride on commands that only read files

    env = os.environ if env is None else env
    cafile, certfile, keyfile = (env.get(name) or None for name in (ENV_CAFILE, ENV_CERTFILE, ENV_KEYFILE))
    for name, path in ((ENV_CAFILE, cafile), (ENV_CERTFILE, certfile), (ENV_KEYFILE, keyfile)):
        if path is not None:
            _readable(path, f"{_FLAGS[name]} / ${name}")
    if keyfile is not None and certfile is None:
        raise UsageError(f"--keyfile / ${ENV_KEYFILE} {keyfile!r} needs --certfile / ${ENV_CERTFILE}")
    context = ssl.create_default_context()
    try:
        if cafile is not None:
            context.load_verify_locations(cafile=cafile)
        if certfile is not None:
            context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        which = (
            f"--cafile {cafile!r}"
            if cafile is not None and "verify" in str(exc).lower()
            else (f"--certfile {certfile!r}" + (f" / --keyfile {keyfile!r}" if keyfile else ""))
        )
        raise UsageError(f"{which}: not a usable PEM file ({exc.reason or exc})") from None
    return context


def describe_failure(detail: str, url: str) -> str | None:
    """One line saying which part of a TLS handshake with `url` failed, from the error's text
    (aiomqtt re-raises the `ssl` error as text only); None if it is no TLS failure."""
    lowered = detail.lower()
    if "hostname mismatch" in lowered or "ip address mismatch" in lowered:
        return (
            f"TLS to {url}: the broker's certificate does not name that host ({detail}): connect by a name "
            "the certificate holds"
        )
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
        return (
            f"TLS to {url}: the broker's certificate is signed by a CA this machine does not trust ({detail}): "
            f"pass --cafile FILE or set ${ENV_CAFILE} to the CA's PEM"
        )
    if "certificate_required" in lowered or "alert_bad_certificate" in lowered or "unknown_ca" in lowered:
        return (
            f"TLS to {url}: the broker refused this client's certificate or asked for one ({detail}): pass "
            f"--certfile/--keyfile or set ${ENV_CERTFILE}/${ENV_KEYFILE}"
        )
    if "wrong_version_number" in lowered or "[ssl" in lowered:
        return f"TLS to {url} failed ({detail}): is it a TLS port? mqtts:// is for TLS listeners only"
    return None


class _TlsFile(argparse.Action):
    """`--cafile` and co.: checked as read, and kept as the environment variable (see the module)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        path = str(values)
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise argparse.ArgumentError(self, f"{path!r}: no such readable file")
        os.environ[str(self.const)] = os.path.abspath(path)


def add_tls_args(parser: argparse.ArgumentParser) -> None:
    """`--cafile`, `--certfile`, `--keyfile`, beside `--broker`."""
    for flag, env, what in (
        ("--cafile", ENV_CAFILE, "trust this CA (PEM) too for mqtts:// brokers (a private CA)"),
        ("--certfile", ENV_CERTFILE, "present this client certificate (PEM) to mqtts:// brokers (mTLS)"),
        ("--keyfile", ENV_KEYFILE, "the private key of --certfile, if it is not in that file"),
    ):
        parser.add_argument(
            flag, metavar="PEM", action=_TlsFile, const=env, default=argparse.SUPPRESS, help=f"{what} (default: ${env})"
        )


__all__ = ["ENV_CAFILE", "ENV_CERTFILE", "ENV_KEYFILE", "add_tls_args", "client_context", "describe_failure"]
