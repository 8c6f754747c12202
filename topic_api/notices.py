"""Hearing the mirrors' notices: one datagram socket for all, drained on the event loop.

:class:`topic_api.watcher.SnapshotWatcher` opens a :class:`NoticeSocket` on the snapshot
folder's address (:func:`phrame.settings.mirror_notices.notice_address`) and is handed each
batch of parsed notices (:meth:`NoticeSocket.drain`, an event-loop reader). A socket file
left by a topic API that died is replaced; one still answered by another topic API is
left alone (this one then polls the files). A notice that does not parse is skipped. It
never holds a broker subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phrame.settings.mirror_notices import MAX_NOTICE, notice_address

log = logging.getLogger(__name__)
BATCH = 2_000  # datagrams read in one go before other work on the loop gets a turn


class NoticeSocket:
    def __init__(self, folder: Path, on_batch: Callable[[list[dict[str, Any]]], None]) -> None:
        self.address = notice_address(folder)
        self.on_batch = on_batch
        self.received = 0
        self._sock: socket.socket | None = None
        self._refused: str | None = None  # why the last open failed (said once)

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def open(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Bind and start reading; False (logged) when another topic API has the socket or
        the folder is not there yet."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._bind(sock)
        except OSError as e:
            sock.close()
            if str(e) != self._refused:
                self._refused = str(e)
                log.info("no change notices at %r (%s): polling the snapshot files", self.address, e)
            return False
        if self._refused is not None:
            log.info("change notices heard at %r from now", self.address)
        self._refused = None
        sock.setblocking(False)
        self._sock = sock
        loop.add_reader(sock.fileno(), self.drain)
        return True

    def _bind(self, sock: socket.socket) -> None:
        try:
            sock.bind(self.address)
            return
        except OSError as e:
            if self.address.startswith("\0") or not os.path.exists(self.address):
                raise
            stale = e
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect(self.address)
            except ConnectionRefusedError:  # nobody reads it: left by a topic API that died
                os.unlink(self.address)
                sock.bind(self.address)
                return
        raise stale  # another topic API reads these notices

    def drain(self) -> None:
        """Read every datagram waiting (up to :data:`BATCH`) and hand them over as one batch."""
        if self._sock is None:
            return
        batch: list[dict[str, Any]] = []
        for _ in range(BATCH):
            try:
                data = self._sock.recv(MAX_NOTICE + 1024)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                log.warning("reading the mirrors' notices failed: %s", e)
                break
            try:
                note = json.loads(data)
            except ValueError:
                continue
            if isinstance(note, dict):
                batch.append(note)
        self.received += len(batch)
        if batch:
            self.on_batch(batch)

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        if not self.address.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(self.address)
