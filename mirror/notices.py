"""Telling the topic API of each change at once, between the debounced snapshots.

:class:`mirror.loop.MirrorLoop` calls :meth:`ChangeNotices.changed` for every message and
:meth:`ChangeNotices.written` after each snapshot, from its own threads. A notice is one
JSON datagram to :func:`phrame.settings.mirror_notices.notice_address`: the plane, this
mirror's ``instance``, the message count ``seq`` (the snapshot's ``messages`` says which
notices it already holds) and the topic with its payload. Best effort: with no reader, a
full buffer or a payload too large a notice is dropped (the snapshot follows within the
debounce); it never blocks and never raises.
"""

from __future__ import annotations

import json
import logging
import socket
import weakref
from pathlib import Path
from typing import Any

from phrame.settings.mirror_notices import MAX_NOTICE, notice_address

log = logging.getLogger(__name__)


class ChangeNotices:
    def __init__(self, folder: Path, plane: str, instance: str) -> None:
        self.address = notice_address(folder)
        self.plane, self.instance = plane, instance
        self.sent = 0
        self.dropped = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        # a loop built but never run (tests) closes it too, when it goes
        self._closer = weakref.finalize(self, self._sock.close)

    def changed(self, seq: int, topic: str, payload: Any, *, cleared: bool) -> None:
        """Message ``seq`` set ``topic`` to ``payload`` (parsed JSON), or ``cleared`` it."""
        data = json.dumps(
            {"plane": self.plane, "instance": self.instance, "seq": seq, "topic": topic,
             "payload": None if cleared else payload, "cleared": cleared},
            separators=(",", ":"),
        ).encode()  # fmt: skip
        if len(data) <= MAX_NOTICE:
            self._send(data)
        else:
            self.dropped += 1

    def written(self, seq: int) -> None:
        """A snapshot holding the first ``seq`` messages was written: read it now."""
        note = {"plane": self.plane, "instance": self.instance, "seq": seq, "written": True}
        self._send(json.dumps(note).encode())

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendto(data, self.address)
            self.sent += 1
        except OSError:  # no topic API listening, its buffer full: the snapshot follows
            self.dropped += 1

    def close(self) -> None:
        self._closer()
