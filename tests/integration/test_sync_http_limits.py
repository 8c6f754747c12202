"""config-sync as its own process (``python -m config_sync``) under hostile connections.

Half-open connections (a request head never finished) against a server whose file limit is
low: it must keep answering ``/healthz`` and authenticated ``/sync``, close those connections
after ``PHRAME_HTTP_HEADER_TIMEOUT_S`` and log the condition, not every event. Also: it
refuses to start without a webhook secret. Everything on 127.0.0.1, bounded in count and time.
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port, stop_process, wait_until
from tests.support.sync_support import ROOT, SAMPLE, SECRET, ConfigRemote

HALF_OPEN = 2_000
SERVER_FILE_LIMIT = 1024  # far below HALF_OPEN: without a cap the server runs out of descriptors
HEADER_TIMEOUT_S = 2.0


def _low_file_limit() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_FILE_LIMIT, SERVER_FILE_LIMIT))


@contextmanager
def config_sync_process(tmp_path: Path, broker_url: str, **extra: str) -> Iterator[tuple[str, Path]]:
    remote = ConfigRemote(tmp_path)
    remote.commit("sample", copy_from=SAMPLE)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PHRAME_REPO_URL": str(remote.bare_path),
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
        "PHRAME_DESIRED_MQTT_URL": broker_url,
        "PHRAME_LISTEN": f"127.0.0.1:{port}",
        "PHRAME_WEBHOOK_SECRET": SECRET,
        "PHRAME_POLL_S": "3600",
        **extra,
    }
    env = {k: v for k, v in env.items() if v}  # an empty value here means "unset"
    log = tmp_path / "config-sync.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "config_sync"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_low_file_limit,
        )
    try:
        base = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            assert proc.poll() is None, f"config-sync exited: {log.read_text()[-2000:]}"
            try:
                return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, "config-sync to become ready", timeout=60)
        yield base, log
    finally:
        stop_process(proc, timeout=10)


def _open_half_open(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)  # a full backlog delays connect
        s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the head
        socks.append(s)
    return socks


def _wait_all_closed(socks: list[socket.socket], timeout: float) -> int:
    """Until the server closed every socket (EOF or reset); return how many stayed open."""
    selector = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    open_ = len(socks)
    deadline = time.monotonic() + timeout
    while open_ and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except (ConnectionResetError, BlockingIOError) as e:
                data = b"" if isinstance(e, ConnectionResetError) else b"more"
            if not data:
                selector.unregister(sock)
                open_ -= 1
    selector.close()
    return open_


@pytest.mark.slow
def test_half_open_connections_do_not_take_config_sync_down(tmp_path: Path, mosquitto: Mosquitto) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < HALF_OPEN + 200:  # this test's own sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, HALF_OPEN + 500), hard))
    settings = {"PHRAME_HTTP_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S)}
    with config_sync_process(tmp_path, mosquitto.url, **settings) as (base, log):
        port = int(base.rsplit(":", 1)[1])
        socks = _open_half_open(port, HALF_OPEN)
        try:
            started = time.monotonic()
            with httpx.Client(base_url=base, timeout=5) as http:
                assert http.get("/healthz").status_code == 200
                auth = {"Authorization": f"Bearer {SECRET}"}
                assert http.post("/sync", headers=auth).status_code == 202
            still_open = _wait_all_closed(socks, timeout=HEADER_TIMEOUT_S + 10)
            assert still_open == 0, f"{still_open} half-open connections were never closed"
            assert time.monotonic() - started < HEADER_TIMEOUT_S + 10
        finally:
            for s in socks:
                s.close()
        with httpx.Client(base_url=base, timeout=5) as http:
            assert http.get("/healthz").status_code == 200
    text = log.read_text(errors="replace")
    assert text.count("out of system resource") <= 5, "the accept error is logged per event"
    assert "header timeout" in text  # the condition is said, once per interval


@pytest.mark.slow
@pytest.mark.parametrize(
    ("secret", "needle"),
    [("", "PHRAME_WEBHOOK_SECRET"), ("file:", "empty")],
)
def test_config_sync_refuses_to_start_without_a_webhook_secret(
    tmp_path: Path, secret: str, needle: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    env |= {"PYTHONPATH": str(ROOT), "PHRAME_REPO_URL": str(tmp_path / "none.git")}
    env["PHRAME_LISTEN"] = f"127.0.0.1:{free_port()}"
    env["PHRAME_STATE_DIR"] = str(tmp_path / "state")
    if secret == "file:":
        empty = tmp_path / "secret"
        empty.write_text("\n")
        env["PHRAME_WEBHOOK_SECRET_FILE"] = str(empty)
    done = subprocess.run(
        [sys.executable, "-m", "config_sync"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert needle in done.stderr and "PHRAME_INSECURE_NO_WEBHOOK_SECRET" in done.stderr
