"""Which commands may run: each only as it is sent, once, and while it is fresh.

:class:`node_agent.commands.RestartCommands` and :class:`node_agent.log_commands.LogCommands`
share one :class:`CommandGate`. A command the broker kept (the retain flag: a replay on
subscribe), one whose ``ts`` is more than ``max_age_s`` from this node's clock, and one whose
``id`` ran already raise :class:`CommandDropped` saying why. Pure apart from its lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from node_agent.errors import printable
from phrame.mqtt import Message
from schemas import PayloadError, Topics, check_payload, load_json

log = logging.getLogger(__name__)

MAX_AGE_S = 60.0  # PHRAME_COMMAND_MAX_AGE_S
MAX_IDS = 4096  # ids remembered; a command older than max_age_s is dropped anyway


class CommandDropped(ValueError):
    """A well-formed command that must not run: retained, stale, from the future, or a repeat."""


class CommandGate:
    def __init__(
        self,
        *,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
        max_ids: int = MAX_IDS,
    ) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        self.max_ids = max_ids
        self.seen: OrderedDict[str, float] = OrderedDict()  # id -> its ts, oldest first
        self._lock = threading.Lock()  # commands arrive on the MQTT thread(s)

    def admit(self, msg: Message, topics: Topics, node: str, kind: str) -> tuple[str, dict[str, Any]] | None:
        """(item id, payload) of a ``kind`` command (``restart``, ``logs``) for ``node`` that
        is valid under ``cmd-<kind>`` and may run now (:meth:`check`); None, logged, otherwise."""
        try:
            topic = topics.parse(msg.topic)
            if topic.kind != kind or topic.node != node or not topic.item_id:
                raise ValueError(f"{msg.topic}: not a {kind} command for node {node}")
            doc = load_json(msg.payload or b"{}")
            check_payload(f"cmd-{kind}", doc)
            self.check(msg, doc)
        except CommandDropped as e:
            log.warning("dropped %s command on %s: %s", kind, printable(msg.topic), printable(str(e)))
            return None
        except (ValueError, PayloadError) as e:
            log.warning("refused command on %s: %s", printable(msg.topic), printable(str(e)))
            return None
        return topic.item_id, doc

    def check(self, msg: Message, doc: Mapping[str, Any]) -> None:
        """Raise :class:`CommandDropped` unless this command may run now; remember its id."""
        if msg.retain:
            raise CommandDropped(
                "it is retained (the broker's stored copy, replayed on subscribe): a command runs "
                "only as it is sent; clear the topic with an empty retained message"
            )
        command_id, ts, now = str(doc["id"]), float(doc["ts"]), self.clock()
        if now - ts > self.max_age_s:
            raise CommandDropped(
                f"id {command_id} is {now - ts:.0f} s old (ts {ts:.3f}); commands older than "
                f"PHRAME_COMMAND_MAX_AGE_S={self.max_age_s:g} s are dropped"
            )
        if ts - now > self.max_age_s:
            raise CommandDropped(
                f"id {command_id} is {ts - now:.0f} s in the future (ts {ts:.3f}) by this node's "
                f"clock; more than PHRAME_COMMAND_MAX_AGE_S={self.max_age_s:g} s: check the clocks"
            )
        with self._lock:
            self._forget_old(now)
            if command_id in self.seen:
                raise CommandDropped(f"id {command_id} already ran")
            self.seen[command_id] = ts
            while len(self.seen) > self.max_ids:
                self.seen.popitem(last=False)

    def _forget_old(self, now: float) -> None:
        # an id whose command would be dropped as old anyway need not be remembered; a
        # command from the future is kept until it has been old for as long
        for command_id, ts in list(self.seen.items()):
            if now - ts > self.max_age_s:
                del self.seen[command_id]
