"""Noticing new snapshot files cheaply: one poller for all clients, each new file parsed once.

Started by the app's lifespan. Every ``poll_s`` it stats ``desired.json`` and
``actual.json`` (mtime, size, inode: the mirror replaces the file, so a new one has a new
inode); only a changed file is read and parsed, in a worker thread, and applied to
:class:`topic_api.state.ApiState`; a change is published to the :class:`EventHub`. A
missing or unreadable file keeps the last good view. It also ends the streams when the
server is stopping (``should_stop``), so uvicorn's shutdown never waits on an open stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from phrame.settings.logs import ConditionLog
from topic_api.events import EventHub
from topic_api.metrics import ApiMetrics
from topic_api.state import PLANES, ApiState

log = logging.getLogger(__name__)
Stamp = tuple[int, int, int]


def stamp_of(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def read_document(path: Path) -> dict[str, Any]:
    """The parsed snapshot (``OSError``/``ValueError`` when it cannot be read)."""
    doc = json.loads(path.read_bytes())
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


class SnapshotWatcher:
    def __init__(
        self,
        directory: Path,
        state: ApiState,
        hub: EventHub,
        *,
        poll_s: float = 0.1,
        clock: Callable[[], float] = time.time,
        metrics: ApiMetrics | None = None,
    ) -> None:
        self.metrics = metrics
        self.directory = directory
        self.state = state
        self.hub = hub
        self.poll_s = poll_s
        self.clock = clock
        self.should_stop: Callable[[], bool] = lambda: False
        self.stamps: dict[str, Stamp | None] = {p: None for p in PLANES}
        self.reads = 0
        self.notes = ConditionLog(log)

    async def check(self) -> None:
        """One pass: read and apply each plane whose file changed."""
        for plane in PLANES:
            path = self.directory / f"{plane}.json"
            stamp = stamp_of(path)
            if stamp is None or stamp == self.stamps[plane]:
                if stamp is None and plane not in self.state.loaded:
                    self.notes.note(
                        f"missing-{plane}", "no snapshot %s yet (is phrame mirror running?)", path
                    )
                continue
            self.stamps[plane] = stamp  # a bad file is read once, not every poll
            try:
                doc = await anyio.to_thread.run_sync(read_document, path)
            except (OSError, ValueError) as e:
                self.notes.note(f"bad-{plane}", "cannot read snapshot %s: %s; keeping the last one", path, e)
                continue
            self.reads += 1
            change = self.state.apply(plane, doc, self.clock())
            if self.metrics is not None:
                self.metrics.snapshot_reads.labels(plane).inc()
            if change is not None:
                self.hub.publish(change)
                if self.metrics is not None:
                    self.metrics.changes.inc()

    async def run(self) -> None:
        """Poll until cancelled; a failing pass is logged and the loop goes on."""
        while True:
            if self.should_stop() and not self.hub.closed:
                self.hub.close()
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop never dies from one bad pass
                log.exception("snapshot watcher pass failed; retrying")
            await asyncio.sleep(self.poll_s)
