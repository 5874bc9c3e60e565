"""The soak's processes: a broker, its projector, the runners, the workspace's tmpfs; and the faults.

Every process is started here, stopped by its PID, and logs into the run's directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from brokers import documented_mosquitto_conf, free_port, wait_for_port  # noqa: E402

BIN = Path(sys.executable).parent
AMBIENT = ("WORKSPACE_ROOT", "DELEGATE_JOB_LOGS_DIR", "MAM_BROKER_URL")
KINDS = ("mosquitto", "up", "spool", "nats")
PROJECTOR_HEARTBEAT = "2"
"""mam-projector republishes its status this often (s), so a live `online` comes soon after a fault."""


def child_env() -> dict[str, str]:
    """This environment without anything that could point a child at a real workspace or broker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAM_") and k not in AMBIENT}
    env["MAM_BROKER_URL"] = "mqtt://127.0.0.1:9"
    return env


def binary(name: str) -> str:
    for path in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/usr/local/bin/{name}"):
        if os.path.exists(path):
            return path
    raise SystemExit(f"soak: {name} is not installed (apt-get install {name})")


@dataclass
class Proc:
    """A child process and the command that starts it again, logging into `log`."""

    cmd: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env()
            )
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill9(self) -> None:
        if self.alive():
            assert self.popen is not None
            self.popen.kill()
            self.popen.wait(10)

    def stop(self, timeout: float = 15) -> None:
        if self.alive():
            assert self.popen is not None
            os.kill(self.popen.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


@dataclass
class Stack:
    """One broker kind with its projector and runners, for workspace `root` (id `ws`)."""

    kind: str
    run_dir: Path
    root: Path
    ws: str
    port: int = 0
    broker: Proc | None = None
    projector: Proc | None = None
    runners: list[Proc] = field(default_factory=list)
    tmpfs: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def projector_proc(self) -> Proc:
        """The process that projects: `mam up` itself, or `mam-projector`."""
        proc = self.broker if self.kind == "up" else self.projector
        assert proc is not None
        return proc

    # --- starting --------------------------------------------------------------------------------------------

    def mount_tmpfs(self, megabytes: int) -> None:
        """A tmpfs of its own for the workspace's `.mam` (registry and logs), so a full disk can be made."""
        mam_dir = self.root / ".mam"
        mam_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(mam_dir)],
            capture_output=True,
            text=True,
        )
        self.tmpfs = done.returncode == 0
        if not self.tmpfs:
            self.notes.append(f"full disk n/a: mount -t tmpfs failed ({done.stderr.strip() or done.returncode})")

    def unmount(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.root / ".mam")], capture_output=True)
            self.tmpfs = False

    def start_broker(self) -> None:
        self.port = free_port()
        if self.kind == "mosquitto":
            data = self.run_dir / "mosquitto-data"
            data.mkdir(exist_ok=True)
            (conf := self.run_dir / "mosquitto.conf").write_text(documented_mosquitto_conf(self.port, data))
            cmd = [binary("mosquitto"), "-c", str(conf)]
        elif self.kind == "nats":
            store, client_port = self.run_dir / "nats-js", free_port()
            store.mkdir(exist_ok=True)
            # As the suite runs NATS (tests/brokers.py): JetStream, and its MQTT listener on our port.
            (conf := self.run_dir / "nats.conf").write_text(
                f'server_name: "mam-soak-{self.port}"\nlisten: 127.0.0.1:{client_port}\n'
                f'jetstream {{ store_dir: "{store}" }}\n'
                f'mqtt {{ listen: 127.0.0.1:{self.port}, ack_wait: "{os.environ.get("SOAK_NATS_ACK_WAIT", "2s")}", max_ack_pending: 16000 }}\n'
            )
            cmd = [binary("nats-server"), "-c", str(conf)]
        elif self.kind == "spool":
            cmd = [str(BIN / "mam-broker"), "--port", str(self.port), "--spool", str(self.run_dir / "spool")]
        else:
            cmd = self._up_cmd()
        self.broker = Proc(cmd, self.run_dir / f"{self.kind}.log").start()
        wait_for_port(self.port, self.broker.popen)  # type: ignore[arg-type]

    def _up_cmd(self) -> list[str]:
        return [str(BIN / "mam"), "up", "--port", str(self.port), "--workspace", str(self.root),
                "--workspace-id", self.ws]  # fmt: skip

    def start_projector(self) -> None:
        """mam-projector (none for `mam up`, whose broker process projects)."""
        if self.kind == "up":
            return
        cmd = [str(BIN / "mam-projector"), "--broker", self.url, "--workspace", str(self.root),
               "--workspace-id", self.ws, "--heartbeat", PROJECTOR_HEARTBEAT]  # fmt: skip
        self.projector = Proc(cmd, self.run_dir / "projector.log").start()

    def start_runner(self, concurrency: int) -> Proc:
        n = len(self.runners)
        cmd = [str(BIN / "mam-agent"), "--agent", "shell", "--profile", "shell", "--concurrency", str(concurrency),
               "--agent-id", f"soak-runner-{n}", "--kill-grace", "1", "--broker", self.url,
               "--workspace", str(self.root), "--workspace-id", self.ws]  # fmt: skip
        runner = Proc(cmd, self.run_dir / f"runner-{n}.log").start()
        self.runners.append(runner)
        return runner

    def restart_broker(self, *, hard: bool) -> None:
        """kill -9 (`hard`) or stop the broker, then start the same command on the same port."""
        assert self.broker is not None
        if hard:
            self.broker.kill9()
        else:
            self.broker.stop()
        self.broker.start()
        wait_for_port(self.port, self.broker.popen)  # type: ignore[arg-type]

    def stop_all(self) -> None:
        for runner in self.runners:
            runner.stop()
        if self.projector is not None:
            self.projector.stop()
        if self.broker is not None:
            self.broker.stop()

    # --- the full disk ---------------------------------------------------------------------------------------

    def fill_disk(self) -> Path:
        """Take every free byte of the workspace's tmpfs with one file; return it (delete it to empty)."""
        filler = self.root / ".mam" / "soak-filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            st = os.fstatvfs(fd)
            try:
                os.posix_fallocate(fd, 0, max(1, st.f_bavail * st.f_frsize))
            except OSError:
                pass
            chunk = b"\0" * (1 << 16)
            try:  # what fallocate left (rounding, blocks taken meanwhile)
                os.lseek(fd, 0, os.SEEK_END)
                while os.write(fd, chunk):
                    pass
            except OSError:
                pass
        finally:
            os.close(fd)
        return filler
