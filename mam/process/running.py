"""Running a mam process's body: its expected failures as one line and an exit code (`run_cli`), and
its logging on stderr by the number of `-v`s (`setup_logging`), every line of it made safe to print
(`LogFormatter`: a topic, client id or user name in it shows its control characters escaped)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from mam.contract.errors import MamError
from mam.contract.terminal import safe


def fail(prog: str, message: str, code: int) -> NoReturn:
    print(f"{prog}: error: {safe(message)}", file=sys.stderr)
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


class LogFormatter(logging.Formatter):
    """Every log line of a mam process made safe, whoever logs it and whatever its arguments hold.

    The message is one line: a newline in it is escaped too, so no topic, client id or user name can
    start a line of its own that reads as the process's (`mam: ...`). A traceback or stack that follows
    keeps its lines, each indented two spaces under the message (so none of its lines, an exception's
    text among them, starts where a log line starts) and escaped like the message but for its layout.
    """

    def format(self, record: logging.LogRecord) -> str:
        record.message = safe(record.getMessage(), keep_layout=False)
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        blocks = []
        if record.exc_info:
            blocks.append(self.formatException(record.exc_info))
        elif record.exc_text:
            blocks.append(record.exc_text)
        if record.stack_info:
            blocks.append(self.formatStack(record.stack_info))
        for block in blocks:
            line += "\n" + "\n".join("  " + part for part in safe(block.rstrip("\n")).split("\n"))
        return line


# Libraries whose debug (and, for amqtt, error) logging is theirs, not mam's: off below -vv.
# amqtt logs every client disconnect and its own startup failures as errors with tracebacks
# (mam reports what matters in one line itself), transitions every state change of its sessions,
# asyncio its selector.
LIBRARY_LOGGERS = ("amqtt", "transitions", "asyncio")
MQTT_LOGGER = "mqtt"
"""aiomqtt's logger, and paho-mqtt's through it (`mam.client.mqtt.LibraryChatter` takes their connection chatter off it)."""


def setup_logging(prog: str, verbose: int = 0) -> None:
    """Logging on stderr for `verbose` `-v`s: none, mam's info; `-v`, mam's debug lines as well;
    `-vv`, every library's debug lines too (amqtt, transitions, asyncio, paho, mcp...). Inside a job
    (`$MAM_JOB_ID`: stderr is the job's output) the MQTT client's warnings are left out as well, below `-vv`:
    the job's output holds the job's lines and one per broker outage (`mam.client.outage`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter(f"{prog}: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose >= 2 else logging.INFO, handlers=[handler])
    if verbose >= 1:
        logging.getLogger("mam").setLevel(logging.DEBUG)
    if verbose < 2:
        for noisy in LIBRARY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.CRITICAL)
        if os.environ.get("MAM_JOB_ID"):
            logging.getLogger(MQTT_LOGGER).setLevel(logging.ERROR)


__all__ = ["LIBRARY_LOGGERS", "LogFormatter", "fail", "run_cli", "setup_logging"]
