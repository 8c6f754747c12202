"""What the agent remembers of the containers it started again after they exited.

The loop calls :meth:`RestartLog.note_started` with each container a pass started from
``exited`` (the exit code read from that pass's container list, before the start: Docker
resets ``ExitCode`` on start and ``RestartCount`` counts only its own policy's restarts);
:mod:`node_agent.reporting` turns a record into ``last_exit`` and ``agent_restarts``.
In memory: a new agent process takes a record back from its own retained report
(:meth:`recall`) only when that report's ``last_exit`` is of the exit Docker still shows.
Never acts on Docker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node_agent.models import ActionOutcome, ActualState, ObservedContainer, Op


def started_containers(outcomes: Iterable[ActionOutcome], actual: ActualState) -> list[ObservedContainer]:
    """The containers a pass started (``START`` that succeeded), as its list saw them before."""
    by_id = {c.id: c for c in actual.containers.values()}
    refs = [o.action.ref for o in outcomes if o.ok and o.action.op is Op.START]
    return [by_id[ref] for ref in refs if ref in by_id]


@dataclass
class ExitRecord:
    exit_code: int
    finished_at: str | None = None  # Docker's FinishedAt of that exit, from the next inspect
    starts: int = 1  # how often this agent started this container after an exit


class RestartLog:
    def __init__(self) -> None:
        self._records: dict[str, ExitRecord] = {}  # by container id
        self._recalled: set[str] = set()  # ids whose retained report was looked at

    def note_started(self, containers: Iterable[ObservedContainer]) -> None:
        """These containers were started by this pass; those that had exited get a record
        (a ``created`` one never ran: there is no exit to tell)."""
        for c in containers:
            if c.state != "exited" or c.exit_code is None:
                continue
            old = self._records.get(c.id)
            self._records[c.id] = ExitRecord(c.exit_code, None, (old.starts if old else 0) + 1)

    def recall(self, container_id: str, finished_at: str | None, retained: bytes | None) -> None:
        """Once per container, without a record: take ``last_exit`` back from ``retained``
        (this item's report as the broker holds it) if it is of the exit Docker shows."""
        if container_id in self._records or container_id in self._recalled or not retained:
            return
        self._recalled.add(container_id)
        try:
            doc = json.loads(retained)
        except ValueError:
            return
        last = doc.get("last_exit") if isinstance(doc, dict) else None
        starts = doc.get("agent_restarts") if isinstance(doc, dict) else None
        if not isinstance(last, dict) or finished_at is None or last.get("finished_at") != finished_at:
            return
        code = last.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and last.get("restarted_by") == "agent":
            count = starts if isinstance(starts, int) and starts > 0 else 1
            self._records[container_id] = ExitRecord(code, finished_at, count)

    def fields(self, container_id: str, finished_at: str | None) -> dict[str, Any]:
        """``last_exit`` and ``agent_restarts`` of one container's report. The first inspect
        after the start pins the record's ``finished_at`` (Docker keeps it while it runs)."""
        record = self._records.get(container_id)
        if record is None:
            return {"last_exit": None, "agent_restarts": 0}
        if record.finished_at is None:
            record.finished_at = finished_at
        last = {"exit_code": record.exit_code, "finished_at": record.finished_at, "restarted_by": "agent"}
        return {"last_exit": last, "agent_restarts": record.starts}

    def keep_only(self, container_ids: Mapping[str, Any] | Iterable[str]) -> None:
        """Forget containers that are gone (removed or recreated: a new id starts afresh)."""
        alive = set(container_ids)
        for gone in set(self._records) - alive:
            del self._records[gone]
        self._recalled &= alive
