"""The one imperative verb: ``phrame/cmd/nodes/<node>/containers/<id>/restart``.

The loop feeds every ``cmd`` message to :meth:`RestartCommands.accept` (MQTT thread) and
runs :meth:`RestartCommands.run` at the start of each pass. It restarts only this node's
managed containers, never the agent's own; anything else is refused and logged. A command
runs only as it is sent, once: one the broker kept (the retain flag: a replay on subscribe),
one whose ``ts`` is more than ``max_age_s`` from this node's clock, and one whose ``id`` ran
already are dropped, each logged with why.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from node_agent.errors import printable
from node_agent.models import NODE, ObservedContainer
from node_agent.plan import is_own_container
from phrame.mqtt import Message
from schemas import PayloadError, Topics, check_payload, load_json

log = logging.getLogger(__name__)
MAX_AGE_S = 60.0  # PHRAME_COMMAND_MAX_AGE_S
MAX_IDS = 4096  # ids remembered; a command older than max_age_s is dropped anyway


class Restarter(Protocol):
    def list_containers(self) -> list[ObservedContainer]: ...
    def restart(self, name: str) -> None: ...


class CommandDropped(ValueError):
    """A well-formed command that must not run: retained, stale, from the future, or a repeat."""


class RestartCommands:
    def __init__(
        self,
        topics: Topics,
        node: str,
        docker: Restarter,
        own_container_id: str | None,
        *,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
        max_ids: int = MAX_IDS,
    ) -> None:
        self.topics = topics
        self.node = node
        self.docker = docker
        self.own_container_id = own_container_id
        self.max_age_s = max_age_s
        self.clock = clock
        self.max_ids = max_ids
        self.seen: OrderedDict[str, float] = OrderedDict()  # id -> its ts, oldest first
        self._seen_lock = threading.Lock()  # accept runs on the MQTT thread(s)
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()

    def accept(self, msg: Message) -> bool:
        """Queue a valid, fresh, new restart command for this node; return False (logged) otherwise."""
        try:
            topic = self.topics.parse(msg.topic)
            if topic.kind != "restart" or topic.node != self.node or not topic.item_id:
                raise ValueError(f"{msg.topic}: not a command for node {self.node}")
            doc = load_json(msg.payload or b"{}")
            check_payload("cmd-restart", doc)
            self._check_once(msg, doc)
        except CommandDropped as e:
            log.warning("dropped restart command on %s: %s", printable(msg.topic), printable(str(e)))
            return False
        except (ValueError, PayloadError) as e:
            log.warning("refused command on %s: %s", printable(msg.topic), printable(str(e)))
            return False
        self._queue.put(topic.item_id)
        return True

    def _check_once(self, msg: Message, doc: dict[str, Any]) -> None:
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
        with self._seen_lock:
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

    def run(self) -> list[str]:
        """Run the queued commands; return their errors (for the node status). Never raises."""
        errors: list[str] = []
        while not self._queue.empty():
            item_id = self._queue.get()
            try:
                self._restart(item_id)
            except Exception as e:  # Docker down, or a bug: the command fails, the loop goes on
                log.warning("node %s: restart of %s failed: %s", self.node, item_id, e)
                errors.append(f"restart {item_id} failed: {e}")
        return errors

    def _restart(self, item_id: str) -> None:
        # by labels, not by name: with PHRAME_SHARED_DAEMON the name also carries the node
        mine = [c for c in self.docker.list_containers() if c.labels.get(NODE) == self.node]
        found = sorted((c for c in mine if c.item_id == item_id), key=lambda c: c.state != "running")
        c = found[0] if found else None
        if c is None:
            log.warning("refused restart of %s: not a managed container of %s", item_id, self.node)
            return
        if is_own_container(c, self.own_container_id):
            log.warning("refused restart of %s: it is the agent's own container", item_id)
            return
        self.docker.restart(c.id)
        log.info("restarted %s on request", item_id)
