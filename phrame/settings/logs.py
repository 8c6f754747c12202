"""Log set-up for the service sub-commands: text by default, one JSON object a line with
``PHRAME_LOG_FORMAT=json`` (for log shippers); and two guards that keep a flood of one
event (a hostile client, an exhausted resource) to one line per interval with a count."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable

FLOOD_INTERVAL_S = 10.0
Clock = Callable[[], float]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": record.created, "level": record.levelname, "logger": record.name}
        doc["message"] = record.getMessage()
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if (os.environ.get("PHRAME_LOG_FORMAT") or "text").strip().lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


class _Window:
    """Per condition: when it was last said, and how often it happened since."""

    def __init__(self, interval_s: float, clock: Clock) -> None:
        self.interval_s, self.clock = interval_s, clock
        self.last: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.lock = threading.Lock()

    def hit(self, key: str) -> int | None:
        """None: stay quiet; else say it now, with this many more since the last line."""
        with self.lock:
            now = self.clock()
            last = self.last.get(key)
            if last is not None and now - last < self.interval_s:
                self.count[key] = self.count.get(key, 0) + 1
                return None
            self.last[key] = now
            return self.count.pop(key, 0)


class FloodFilter(logging.Filter):
    """Lets a record whose message contains one of ``patterns`` through once per
    interval, telling how many were dropped; used on asyncio's accept-error record, which
    otherwise repeats (with a traceback) for every failed accept."""

    def __init__(
        self, patterns: Iterable[str], *, interval_s: float = FLOOD_INTERVAL_S, clock: Clock = time.monotonic
    ) -> None:
        super().__init__()
        self.patterns = tuple(patterns)
        self._window = _Window(interval_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        key = next((p for p in self.patterns if p in message), None)
        if key is None:
            return True
        more = self._window.hit(key)
        if more is None:
            return False
        first = message.splitlines()[0]
        record.msg = f"{first} ({more} more in the last {self._window.interval_s:g} s; once per interval)"
        record.args, record.exc_info, record.exc_text = None, None, None
        return True


class ConditionLog:
    """``note(key, message, *args)``: a warning the first time, then at most once per
    interval with the count since; for conditions caused by clients (timeouts, caps)."""

    def __init__(
        self, logger: logging.Logger, *, interval_s: float = FLOOD_INTERVAL_S, clock: Clock = time.monotonic
    ) -> None:
        self.logger = logger
        self._window = _Window(interval_s, clock)

    def note(self, key: str, message: str, *args: object) -> None:
        more = self._window.hit(key)
        if more is None:
            return
        suffix = f" ({more} more in the last {self._window.interval_s:g} s)" if more else ""
        self.logger.warning(message + suffix, *args)
