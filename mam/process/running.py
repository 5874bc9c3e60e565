"""Running a mam process's body: its expected failures as one line and an exit code (`run_cli`), and
its logging on stderr by the number of `-v`s (`setup_logging`)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import NoReturn

from mam.contract.errors import MamError


def fail(prog: str, message: str, code: int) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def run_cli(prog: str, body: Callable[[], int | None]) -> NoReturn:
    """Run a command body, turning expected failures into one line and an exit code."""
    try:
        code = body()
    except MamError as exc:
        fail(prog, str(exc), exc.exit_code)
    except BaseExceptionGroup as group:
        expected = _only_mam_error(group)
        if expected is None:
            raise
        fail(prog, str(expected), expected.exit_code)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    raise SystemExit(code or 0)


def _only_mam_error(group: BaseExceptionGroup) -> MamError | None:
    """The expected failure a task group wrapped, if that is all it holds."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    errors = [e for e in leaves if isinstance(e, MamError)]
    return errors[0] if errors and len(errors) == len(leaves) else None


# Libraries whose debug (and, for amqtt, error) logging is theirs, not mam's: off below -vv.
# amqtt logs every client disconnect and its own startup failures as errors with tracebacks
# (mam reports what matters in one line itself), transitions every state change of its sessions,
# asyncio its selector.
LIBRARY_LOGGERS = ("amqtt", "transitions", "asyncio")


def setup_logging(prog: str, verbose: int = 0) -> None:
    """Logging on stderr for `verbose` `-v`s: none, mam's info; `-v`, mam's debug lines as well;
    `-vv`, every library's debug lines too (amqtt, transitions, asyncio, paho, mcp...)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose >= 2 else logging.INFO,
        format=f"{prog}: %(message)s",
        stream=sys.stderr,
    )
    if verbose >= 1:
        logging.getLogger("mam").setLevel(logging.DEBUG)
    if verbose < 2:
        for noisy in LIBRARY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.CRITICAL)


__all__ = ["LIBRARY_LOGGERS", "fail", "run_cli", "setup_logging"]
