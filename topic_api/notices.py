"""Hearing the mirrors' change notices: one connection per mirror for all clients.

:class:`topic_api.watcher.SnapshotWatcher` calls :meth:`NoticeLinks.connect` (again while a
plane's mirror is not connected: it may start later or restart) and is handed each batch of
parsed notices, read on the event loop. Connecting needs no write access to the snapshot
folder. A mirror that goes away ends its link (the watcher then polls the files until it
is back); a notice that does not parse is skipped. It never holds a broker subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phrame.settings.mirror_notices import MAX_NOTICE, notice_path
from schemas import load_json

log = logging.getLogger(__name__)
BATCH = 2_000  # notices read in one go before other work on the loop gets a turn
Batch = Callable[[list[dict[str, Any]]], None]


class NoticeLinks:
    def __init__(self, folder: Path, planes: tuple[str, ...], on_batch: Batch) -> None:
        self.paths = {p: notice_path(folder, p) for p in planes}
        self.on_batch = on_batch
        self.received = 0
        self._links: dict[str, socket.socket] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_complete(self) -> bool:
        """Every plane's mirror is connected: its changes are told, nothing needs polling."""
        return len(self._links) == len(self.paths)

    def connect(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Connect to each mirror not connected yet (quietly: it may not run yet); whether a
        new link was made (then whatever changed meanwhile is in the files: read them)."""
        self._loop = loop
        made = False
        for plane, path in self.paths.items():
            if plane in self._links or path is None:
                continue
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.setblocking(False)
            try:
                sock.connect(str(path))
            except OSError:
                sock.close()
                continue
            self._links[plane] = sock
            loop.add_reader(sock.fileno(), self.drain, plane)
            log.info("told of each change by the %s mirror (%s)", plane, path)
            made = True
        return made

    def drain(self, plane: str) -> None:
        """Read every notice waiting on ``plane``'s link (up to :data:`BATCH`), hand them over."""
        sock = self._links.get(plane)
        if sock is None:
            return
        batch: list[dict[str, Any]] = []
        for _ in range(BATCH):
            try:
                data = sock.recv(MAX_NOTICE + 1024)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:  # the mirror went away
                self._drop(plane)
                break
            try:
                note = load_json(data, max_depth=None)  # the mirror checked the payload's depth
            except ValueError:
                continue
            if isinstance(note, dict):
                batch.append(note)
        self.received += len(batch)
        if batch:
            self.on_batch(batch)

    def _drop(self, plane: str, *, quiet: bool = False) -> None:
        sock = self._links.pop(plane, None)
        if sock is None:
            return
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(sock.fileno())
        sock.close()
        if not quiet:
            log.info("the %s mirror's notices ended: polling its snapshot until it is back", plane)

    def close(self) -> None:
        for plane in list(self._links):
            self._drop(plane, quiet=True)
