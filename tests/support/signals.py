"""Run a script whose main thread blocks SIGTERM while another thread does not, so the kernel
must hand the signal to that other thread (as it may in a service), and Python runs the
handler only when the main thread runs again: a wait without a bound never lets it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_OTHER_THREAD = """
import signal, threading
started = threading.Event()
threading.Thread(target=lambda: (started.set(), threading.Event().wait()), daemon=True).start()
started.wait()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # only the other thread takes it
print("ready", flush=True)
"""


def sigterm_while(tmp_path: Path, setup: str, wait: str, timeout: float) -> tuple[int, str]:
    """Run ``setup`` (it installs the SIGTERM handler), then block SIGTERM on the main thread
    and run ``wait`` there; send SIGTERM once it is waiting. (exit code, what it printed
    after), the exit code -9 when it did not end within ``timeout`` (it is then killed)."""
    script = tmp_path / "sigterm_while.py"
    script.write_text(textwrap.dedent(setup) + _OTHER_THREAD + textwrap.dedent(wait))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's phrame, whatever the venv links
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return -9, ""
        return code, proc.stdout.read().strip()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
