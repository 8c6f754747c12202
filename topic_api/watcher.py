"""Noticing changes cheaply: the mirrors' notices, then each new snapshot file parsed once.

Started by the app's lifespan, for all clients. The mirrors tell of each change at once
(:mod:`topic_api.notices`): applied to :class:`topic_api.state.ApiState` as it arrives, and a
"snapshot written" notice has the file read now. It stats ``desired.json`` and
``actual.json`` (mtime, size, inode: the mirror replaces the file) every ``poll_s`` while a
mirror is not connected (not started yet, restarting, no socket), every
:data:`FALLBACK_POLL_S` otherwise; only a changed file is read and parsed, in a worker
thread. A change is published to the :class:`EventHub`. A missing or unreadable file keeps
the last good view. It also ends the streams when the server is stopping (``should_stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from phrame.settings.logs import ConditionLog
from schemas import load_json
from topic_api.events import EventHub
from topic_api.metrics import ApiMetrics
from topic_api.notices import NoticeLinks
from topic_api.state import PLANES, ApiState, Notice

log = logging.getLogger(__name__)
Stamp = tuple[int, int, int]
FALLBACK_POLL_S = 1.0  # with notices: the files are stat'ed this often in case one was lost


def stamp_of(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def read_document(path: Path) -> dict[str, Any]:
    """The parsed snapshot (``OSError``/``ValueError`` when it cannot be read). Strict JSON;
    the depth of each payload was checked by the mirror as it came in."""
    doc = load_json(path.read_bytes(), max_depth=None)
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
        self.notices = NoticeLinks(directory, PLANES, self.on_notices)
        self._wake: asyncio.Event | None = None

    def on_notices(self, batch: list[dict[str, Any]]) -> None:
        """A batch of the mirrors' notices (event loop): changes applied at once, a written
        snapshot read at the next turn of :meth:`run`."""
        by_run: dict[tuple[str, str], list[Notice]] = {}
        for note in batch:
            plane, instance, seq = note.get("plane"), note.get("instance"), note.get("seq")
            if plane not in PLANES or not isinstance(instance, str) or not isinstance(seq, int):
                continue
            if note.get("written"):
                if self._wake is not None:
                    self._wake.set()
                continue
            topic = note.get("topic")
            if isinstance(topic, str):
                notice = Notice(seq, topic, note.get("payload"), note.get("cleared") is True)
                by_run.setdefault((plane, instance), []).append(notice)
        for (plane, instance), notices in by_run.items():
            self._publish(self.state.apply_notices(plane, instance, notices, self.clock()))

    def _publish(self, change: dict[str, Any] | None) -> None:
        if change is None:
            return
        self.hub.publish(change)
        if self.metrics is not None:
            self.metrics.changes.inc()

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
            self._publish(change)

    async def run(self) -> None:
        """Read the files when told (or polled) until cancelled; a failing pass is logged
        and the loop goes on. The notices are read by the event loop meanwhile."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        last_check = 0.0
        try:
            while True:
                if self.should_stop() and not self.hub.closed:
                    self.hub.close()
                if not self.notices.is_complete and self.notices.connect(loop):
                    self._wake.set()  # changes while not connected are in the files
                every = FALLBACK_POLL_S if self.notices.is_complete else self.poll_s
                if self._wake.is_set() or time.monotonic() - last_check >= every:
                    self._wake.clear()
                    last_check = time.monotonic()
                    try:
                        await self.check()
                    except asyncio.CancelledError:
                        raise
                    except Exception:  # the loop never dies from one bad pass
                        log.exception("snapshot watcher pass failed; retrying")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_s)
        finally:
            self.notices.close()
