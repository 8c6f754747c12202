"""Ending a child process the tests started, by its pid: a signal, a grace period, then SIGKILL.

Used by the fault suite's stand-ins and its own-daemon agent. Never looks a process up by
name; a process that already ended is left as it is.
"""

from __future__ import annotations

import signal
import subprocess


def end(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, grace: float = 30.0) -> int | None:
    """Send ``sig`` (SIGTERM: the child's clean stop), SIGKILL after ``grace`` s; its exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode
