"""The audit record of HTTP writes: one log line each, and a retained list of the last ones.

A service builds one :class:`AuditLog` for its writer name (``config-sync``, ``topic-api``)
and calls :meth:`AuditLog.record` after every write it took from a known holder (allowed,
refused or forbidden): who (the token's holder), what (action, target, commit), when and the
result. The list of the last ``keep`` entries is published retained at
``<prefix>/desired/audit/<writer>`` (schema ``desired-audit``). Best-effort by design: the
log line is written first and is the durable record; a publish that fails is logged and
never fails or undoes the write (the next entry republishes the whole list).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from schemas import canonical_json, load_json
from schemas.registry import PayloadError, check_payload

log = logging.getLogger("phrame.audit")
KEEP = 100  # entries retained per writer (the schema's maxItems)
Publish = Callable[[str, bytes], None]  # (topic, payload): publish retained


def audit_entry(
    *,
    ts: float,
    who: str,
    action: str,
    target: str,
    result: str,
    status: int,
    commit: str | None = None,
    detail: str | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "ts": round(ts, 3),
        "who": who[:64],
        "action": action,
        "target": target[:1024],
        "result": result,
        "status": status,
    }
    if commit:
        entry["commit"] = commit[:64]
    if detail:
        entry["detail"] = detail[:500]
    return entry


class AuditLog:
    def __init__(
        self,
        writer: str,
        topic: str,
        publish: Publish | None,
        *,
        keep: int = KEEP,
        clock: Callable[[], float] = time.time,
        previous: Callable[[], bytes | None] | None = None,
    ) -> None:
        """``previous``: the retained list as the broker holds it, taken back before the
        first entry is published (``b""``: nothing retained; None: not known yet, asked again
        at the next entry)."""
        self.writer, self.topic, self.publish, self.clock = writer, topic, publish, clock
        self.previous = previous
        self.entries: deque[dict[str, Any]] = deque(maxlen=keep)
        # held while publishing too: an older list never goes out after a newer one
        self._lock = threading.Lock()

    def restore(self, raw: bytes | None) -> None:
        """Take the retained list back (after a restart), before any new entry; a list that
        does not read is logged and started afresh."""
        if not raw:
            return
        try:
            doc = load_json(raw)
            check_payload("desired-audit", doc)
        except (ValueError, PayloadError) as e:
            log.warning("audit: the retained %s does not read (%s); starting a new list", self.topic, e)
            return
        with self._lock:
            old = list(self.entries)
            self.entries.clear()
            self.entries.extend([*doc["entries"], *old])

    def record(self, *, who: str, action: str, target: str, result: str, status: int, **extra: Any) -> None:
        """Log one write and publish the list (never raises)."""
        entry = audit_entry(
            ts=self.clock(), who=who, action=action, target=target, result=result, status=status, **extra
        )
        more = "".join(f" {k}={entry[k]}" for k in ("commit", "detail") if k in entry)
        log.info(
            "audit: %s %s %s by %s: %s (%d)%s",
            self.writer,
            action,
            target,
            who,
            result,
            status,
            more,
            extra={"audit": entry},
        )
        if self.previous is not None:
            retained = self.previous()
            if retained is not None:
                self.previous = None
                self.restore(retained)
        with self._lock:
            self.entries.append(entry)
            if self.publish is None:
                return
            payload = canonical_json({"writer": self.writer, "entries": list(self.entries)})
            try:
                self.publish(self.topic, payload)
            except Exception as e:  # best-effort: the log line above is the record
                log.warning("audit: could not publish %s (%s); the log keeps the entry", self.topic, e)
