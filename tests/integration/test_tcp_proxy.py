"""The partition proxy of the fault suite (tests/support/tcp_proxy.py) against a real echo server.

Case 9 of the fault suite trusts it to make a link silent without closing it and to let
it resume: these tests hold it to that with plain sockets on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.tcp_proxy import PartitionProxy


class Echo:
    """An echo server counting the connections that reached it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)


@pytest.fixture
def proxy() -> Iterator[tuple[PartitionProxy, Echo]]:
    echo = Echo()
    p = PartitionProxy(echo.port)
    yield p, echo
    p.close()
    echo.listener.close()


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(0.5)
    return s


def test_a_partition_is_silence_both_ways_and_a_heal_delivers_what_was_sent(proxy):
    p, echo = proxy
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(connect(p.port))
        a.sendall(b"before")
        assert a.recv(100) == b"before"
        p.partition()
        a.sendall(b"during")
        with pytest.raises(TimeoutError):  # no answer, and no FIN (recv would return b"")
            a.recv(100)
        late = stack.enter_context(connect(p.port))  # accepted, but it never reaches the server
        late.sendall(b"lost")
        with pytest.raises(TimeoutError):
            late.recv(100)
        assert echo.connections == 1
        p.heal()
        assert a.recv(100) == b"during"  # what was sent during the partition arrives now
        # the connect that never got through is gone (closed with its unread bytes: a reset)
        with contextlib.suppress(ConnectionResetError):
            assert late.recv(100) == b""
        fresh = stack.enter_context(connect(p.port))
        fresh.sendall(b"after")
        assert fresh.recv(100) == b"after"
        assert echo.connections == 2 and p.accepted == 3


def test_a_close_on_one_side_reaches_the_other(proxy):
    p, _echo = proxy
    with connect(p.port) as a:
        a.sendall(b"x")
        assert a.recv(10) == b"x"
        a.shutdown(socket.SHUT_WR)  # our FIN ends the echo; the proxy carries its close back
        assert a.recv(10) == b""


def test_a_throttled_link_delivers_the_servers_bytes_at_its_rate():
    echo = Echo()
    p = PartitionProxy(echo.port, rate_bytes_s=400_000)
    try:
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        with s:
            payload = b"x" * 200_000
            started = time.monotonic()
            s.sendall(payload)  # the client's bytes go at once; the echo comes back throttled
            got = 0
            while got < len(payload):
                got += len(s.recv(65536))
            took = time.monotonic() - started
        assert took >= 0.3, took  # 200 kB at 400 kB/s: 0.5 s, less the last chunk's pause (≤ 64 kB)
    finally:
        p.close()
        echo.listener.close()
