"""Finding the real services tests need, and skipping or failing when they are absent.

A test that needs Docker, mosquitto or docker-registry calls :func:`require`; locally it
skips with the reason, and under ``PHRAME_REQUIRE_SERVICES=1`` (set by ``.ci/run``) it
fails, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable

import pytest


def services_required() -> bool:
    return os.environ.get("PHRAME_REQUIRE_SERVICES") == "1"


def require(condition: bool, reason: str) -> None:
    """Skip (or fail under PHRAME_REQUIRE_SERVICES=1) with ``reason`` unless ``condition``."""
    if condition:
        return
    if services_required():
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str, package: str) -> str:
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )
    require(path is not None, f"{name} not found (Debian package {package})")
    assert path is not None
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 5.0) -> None:
    """Stop a child we started, by its pid: SIGTERM, then SIGKILL after ``timeout``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def eventually(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Poll ``condition`` until it is true or ``timeout`` passes (a bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def wait_until(condition: Callable[[], object], what: str = "condition", timeout: float = 10.0) -> None:
    """:func:`eventually`, failing the test with ``what`` when it never became true."""
    if not eventually(condition, timeout):
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
