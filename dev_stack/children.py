"""One supervised child process: started by pid, its output in a log file, restarted with backoff.

:mod:`dev_stack.supervisor` owns one :class:`Child` per part and calls :meth:`Child.poll`
on every tick. Each child runs in its own session, so a Ctrl-C in the terminal reaches only
the supervisor, which then stops the children in order. It signals only its own pids.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from phrame.runtime import backoff
from phrame.settings.state import inherited_umask

MIN_BACKOFF_S, MAX_BACKOFF_S = 1.0, 30.0
STABLE_AFTER_S = 60.0  # running this long resets the backoff


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    logs: Path
    run_dir: Path
    clock: Callable[[], float] = time.monotonic
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    failures: int = 0
    restarts: int = 0
    history: deque[int] = field(default_factory=lambda: deque(maxlen=5))
    log_start: int = 0  # where this run's lines begin in the log file

    @property
    def log_file(self) -> Path:
        return self.logs / f"{self.name}.log"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def hold_file(self) -> Path:
        """While this file exists a crashed child is not restarted (to simulate a lost node)."""
        return self.run_dir / f"{self.name}.hold"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self) -> None:
        fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # its output is private
        with os.fdopen(fd, "ab") as out:
            out.write(f"--- phrame dev: starting {self.name} at {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.mark_log_start()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops us in order
                umask=inherited_umask(),  # the user's own: agents pass it on to their host processes
            )
        self.started_at = self.clock()
        self.restart_at = None
        self.pid_file.write_text(f"{self.proc.pid}\n")

    def poll(self) -> int | None:
        """The exit code when the child has just died (a restart is then scheduled), else None."""
        if self.proc is None or self.restart_at is not None:
            return None
        code = self.proc.poll()
        if code is None:
            if self.failures and self.clock() - self.started_at > STABLE_AFTER_S:
                self.failures = 0
            return None
        self.history.append(code)
        self.pid_file.unlink(missing_ok=True)
        delay = backoff(self.failures + 1, base=MIN_BACKOFF_S, cap=MAX_BACKOFF_S)
        self.failures += 1
        self.restart_at = self.clock() + delay
        return code

    @property
    def backoff(self) -> float:
        return max(0.0, (self.restart_at or self.clock()) - self.clock())

    def due_for_restart(self) -> bool:
        return self.restart_at is not None and self.clock() >= self.restart_at and not self.hold_file.exists()

    def restart(self) -> None:
        self.restarts += 1
        self.start()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code (None if never started)."""
        proc, self.proc = self.proc, None
        self.restart_at = None
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self.pid_file.unlink(missing_ok=True)
        return proc.returncode

    def mark_log_start(self) -> None:
        """This run's lines begin here: :meth:`tail` shows none of an earlier run's."""
        try:
            self.log_start = self.log_file.stat().st_size
        except OSError:
            self.log_start = 0

    def tail(self, lines: int = 15) -> list[str]:
        """The last lines this run wrote to the child's log (to show with a crash)."""
        try:
            with open(self.log_file, "rb") as f:
                end = f.seek(0, os.SEEK_END)
                start = self.log_start if end >= self.log_start else 0  # replaced meanwhile
                f.seek(max(start, end - 16384))
                text = f.read().decode(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def exit_line(self, code: int) -> str:
        """What the console says of its exit: how it ended and what happens next, one each."""
        if code < 0:
            try:
                how = f"was killed ({signal.Signals(-code).name})"
            except ValueError:
                how = f"was killed (signal {-code})"
        else:
            how = f"exited with code {code}"
        if self.hold_file.exists():
            return f"{self.name} {how}; not restarted while {self.hold_file} exists"
        return f"{self.name} {how}; restarting in {self.backoff:.0f} s"
