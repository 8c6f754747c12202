"""A TCP proxy a test controls, to put a network partition between a client and its server.

Used by the fault suite (``tests/faults/test_9_partition.py``) between one node agent and
the broker. :meth:`PartitionProxy.partition` makes the link silent both ways, as a real
partition is: nothing is forwarded and nothing is closed (no RST, no FIN), so each side
learns of it only from its own timeouts. A connection opened during the partition is
accepted but never reaches the server (its SYN, in a real network, would be lost) and is
closed at :meth:`PartitionProxy.heal`, as the client's connect would have timed out;
established connections resume at the heal with what each side sent meanwhile, as TCP's
retransmissions deliver it. ``rate_bytes_s`` throttles what the server sends (a slow
link: a registry's layers arriving at that rate). Listens on 127.0.0.1 only; closes only
its own sockets.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

TICK_S = 0.05  # how often a paused pump looks at the partition again


class PartitionProxy:
    def __init__(
        self, upstream_port: int, upstream_host: str = "127.0.0.1", *, rate_bytes_s: float | None = None
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.rate_bytes_s = rate_bytes_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(TICK_S * 4)
        self.port: int = self._listener.getsockname()[1]
        self._linked = threading.Event()  # set: forwarding; clear: partitioned
        self._linked.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self.accepted = 0  # connections accepted (a client's reconnects show here)
        self._threads = [threading.Thread(target=self._accept, name="proxy-accept", daemon=True)]
        self._threads[0].start()

    @property
    def is_partitioned(self) -> bool:
        return not self._linked.is_set()

    def partition(self) -> None:
        self._linked.clear()

    def heal(self) -> None:
        self._linked.set()

    def close(self) -> None:
        self._closed.set()
        self._linked.set()  # wake paused pumps so they see the close
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()
        for t in self._threads:
            t.join(5)

    def _keep(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.add(s)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            client.settimeout(None)
            self.accepted += 1
            self._keep(client)
            t = threading.Thread(target=self._serve, args=(client, self.is_partitioned), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, client: socket.socket, blackholed: bool) -> None:
        server: socket.socket | None = None
        try:
            if blackholed:  # it never got through: silent until the heal, then gone
                self._linked.wait()
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                return
            server.settimeout(None)
            self._keep(server)
            self._pump(client, server)
        finally:
            for s in (client, server):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ)
            sel.register(server, selectors.EVENT_READ)
            while not self._closed.is_set():
                if not self._linked.wait(TICK_S):
                    continue  # partitioned: read nothing, so nothing is lost or closed
                for key, _ in sel.select(TICK_S):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = src.recv(65536)
                        if not data:
                            return  # one side closed: close the other (what TCP would carry)
                        peer[src].sendall(data)
                        if self.rate_bytes_s and src is server:  # the link's pace, not a test's wait
                            self._closed.wait(len(data) / self.rate_bytes_s)
                    except OSError:
                        return
