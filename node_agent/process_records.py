"""The records of supervised host processes on disk: ``processes/<id>/meta.json`` per process.

:class:`node_agent.processes.ProcessSupervisor` writes a record when it starts a process and
reads them all when a new agent re-adopts what the previous one started. A record is
replaced atomically (a temp file renamed over it), so a full disk never leaves half of one:
the write raises :class:`RecordError` and the last whole record stays. It never removes a
record other than the one of a process it was asked to forget.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from node_agent.errors import RecordError

log = logging.getLogger(__name__)
META, TMP = "meta.json", "meta.json.tmp"


class ProcessRecords:
    def __init__(self, root: Path) -> None:
        self.root = root  # PHRAME_STATE_DIR/processes

    def folder(self, item_id: str) -> Path:
        return self.root / item_id

    def save(self, item_id: str, meta: dict[str, Any]) -> None:
        """Replace the record of ``item_id``; RecordError (the old record intact) when the
        disk refuses."""
        tmp = self.folder(item_id) / TMP
        try:
            tmp.write_text(json.dumps(meta))
            tmp.replace(self.folder(item_id) / META)
        except OSError as e:
            self._refused(item_id, tmp, e)

    def probe(self, item_id: str, meta: dict[str, Any]) -> None:
        """Write the record-to-be to the temp file only: RecordError when the disk would
        refuse it, before anything is started that would then run without a record."""
        tmp = self.folder(item_id) / TMP
        try:
            tmp.write_text(json.dumps(meta))
        except OSError as e:
            self._refused(item_id, tmp, e)

    def _refused(self, item_id: str, tmp: Path, e: OSError) -> None:
        with contextlib.suppress(OSError):  # a full disk must not keep half a record
            tmp.unlink(missing_ok=True)
        why = e.strerror or str(e)
        raise RecordError(
            f"its record cannot be saved in {self.folder(item_id)} ({why}); not running until it can be"
        ) from e

    def forget(self, item_id: str) -> None:
        (self.folder(item_id) / META).unlink(missing_ok=True)

    def all(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(item id, record) of every readable record; an unreadable one is skipped."""
        if not self.root.is_dir():
            return
        for meta_file in sorted(self.root.glob(f"*/{META}")):
            try:
                meta = json.loads(meta_file.read_text())
            except (OSError, ValueError):
                log.warning("process record %s cannot be read; ignored", meta_file)
                continue
            if isinstance(meta, dict) and isinstance(meta.get("spec"), dict):
                yield meta_file.parent.name, meta
