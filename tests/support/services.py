"""Finding the real services tests need, and skipping or failing when they are absent.

A test that needs Docker, mosquitto or docker-registry calls :func:`require`; locally it
skips with the reason, and under ``PHRAME_REQUIRE_SERVICES=1`` (set by ``.ci/run``) it
fails, so CI can never go green by skipping.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.waiting import wait_for


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


def _below_ephemeral() -> range:
    """Ports under the kernel's range for outgoing connections: a connection's own local
    port never takes one between our pick and the listener's bind. (A client retrying a
    broker that is not up yet even connected to itself on the broker's port, which mosquitto
    then could not bind: "Address already in use".) Each xdist worker its own slice."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    start = max(10000, low - 12000)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slices = 8
    size = (low - start) // slices
    if size < 100:
        return range(0)
    index = int(worker) % slices if worker.isdigit() else 0
    return range(start + index * size, start + (index + 1) * size)


_PORTS = _below_ephemeral()
_next_port = itertools.count(random.randrange(len(_PORTS)) if _PORTS else 0)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range where
    the machine allows (see :func:`_below_ephemeral`); handed out once per process in turn."""
    for _ in range(len(_PORTS)):
        port = _PORTS[next(_next_port) % len(_PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no such range here, or all of it taken
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, timeout: float = 10.0) -> bool:
    """Whether 127.0.0.1:``port`` accepted a connection within ``timeout`` (callers add context).

    Polled every 10 ms: mosquitto listens ~10 ms after its start, and ~400 tests start one."""
    return eventually(lambda: listening(port), timeout, interval=0.01)


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
    """:func:`tests.support.waiting.wait_for` as a bool, for callers that fail with their own
    message (``assert eventually(...), why``) or branch on the answer."""
    try:
        wait_for(condition, "condition", timeout, interval=interval)
    except AssertionError:
        return False
    return True


def wait_until(condition: Callable[[], object], what: str = "condition", timeout: float = 10.0) -> None:
    """:func:`tests.support.waiting.wait_for` (kept as a name: many tests call it)."""
    wait_for(condition, what, timeout)
