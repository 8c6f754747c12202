"""Telling readers (the topic API) of each change at once, between the debounced snapshots.

:class:`mirror.loop.MirrorLoop` calls :meth:`ChangeNotices.changed` for every message (MQTT
network thread) and :meth:`ChangeNotices.written` after each snapshot (writer thread). The
mirror listens on :func:`phrame.settings.mirror_notices.notice_path` (a ``SOCK_SEQPACKET``
socket: one notice per packet); each notice is JSON: the plane, this mirror's ``instance``,
the message count ``seq`` (the snapshot's ``messages`` says which notices it holds) and the
topic with its payload. Best effort: a reader whose buffer is full misses a notice, one
that left is dropped, a payload too large is not sent (the snapshot follows within the
debounce); it never blocks on a reader and never raises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import threading
from pathlib import Path
from typing import Any

from phrame.settings.mirror_notices import MAX_NOTICE, notice_path

log = logging.getLogger(__name__)


class ChangeNotices:
    def __init__(self, folder: Path, plane: str, instance: str) -> None:
        self.path = notice_path(folder, plane)
        self.plane, self.instance = plane, instance
        self.sent = 0  # notices sent, counted once per reader
        self.dropped = 0
        self._server: socket.socket | None = None
        self._connecting = select.poll()  # the server's pending connections, asked cheaply
        self._readers: list[socket.socket] = []
        self._lock = threading.Lock()  # two threads send: the network thread and the writer

    def open(self) -> None:
        """Listen in the (existing) snapshot folder, replacing a socket a mirror left behind."""
        if self.path is None:
            log.warning("no change notices: the socket path in %s is too long; readers poll", self.plane)
            return
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # one mirror per plane: a socket here is a dead one's
            server.bind(str(self.path))
            server.listen(16)
        except OSError as e:
            server.close()
            log.warning("no change notices on %s (%s): readers poll the snapshot files", self.path, e)
            return
        server.setblocking(False)
        self._connecting.register(server.fileno(), select.POLLIN)
        self._server = server

    def changed(self, seq: int, topic: str, payload: Any, *, cleared: bool) -> None:
        """Message ``seq`` set ``topic`` to ``payload`` (parsed JSON), or ``cleared`` it."""
        if not self._has_readers():  # no one to tell: the encoding is the cost (every heartbeat)
            return
        note = {"plane": self.plane, "instance": self.instance, "seq": seq, "topic": topic,
                "payload": None if cleared else payload, "cleared": cleared}  # fmt: skip
        data = json.dumps(note, separators=(",", ":")).encode()
        if len(data) <= MAX_NOTICE:
            self._send(data)
        else:
            self.dropped += 1

    def written(self, seq: int) -> None:
        """A snapshot holding the first ``seq`` messages was written: read it now."""
        note = {"plane": self.plane, "instance": self.instance, "seq": seq, "written": True}
        self._send(json.dumps(note).encode())

    def _has_readers(self) -> bool:
        with self._lock:
            if self._server is None:
                return False
            self._accept()
            return bool(self._readers)

    def _send(self, data: bytes) -> None:
        with self._lock:
            if self._server is None:
                return
            self._accept()
            for reader in list(self._readers):
                try:
                    reader.send(data, socket.MSG_DONTWAIT)
                    self.sent += 1
                except BlockingIOError:  # a slow reader: it misses this one, the snapshot follows
                    self.dropped += 1
                except OSError:  # it left
                    self._readers.remove(reader)
                    reader.close()

    def _accept(self) -> None:
        assert self._server is not None
        # asked for every message: a poll is 0.5 µs, an accept() with no one waiting raises (5 µs)
        if not self._connecting.poll(0):
            return
        while True:
            try:
                reader, _ = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("accepting a reader of the change notices failed: %s", e)
                return
            reader.setblocking(False)
            self._readers.append(reader)

    def close(self) -> None:
        with self._lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            if self._server is not None:
                self._server.close()
                self._server = None
                if self.path is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(self.path)
