"""The imperative verb: ``phrame/cmd/nodes/<node>/containers/<id>/restart``.

The loop feeds every ``cmd`` message to :meth:`RestartCommands.accept` (MQTT thread) and
runs :meth:`RestartCommands.run` at the start of each pass. It restarts only this node's
managed containers, never the agent's own; anything else is refused and logged. A command
runs only as it is sent, once: one the broker kept (the retain flag: a replay on subscribe),
one whose ``ts`` is more than ``max_age_s`` from this node's clock, and one whose ``id`` ran
already are dropped, each logged with why (:class:`node_agent.command_gate.CommandGate`,
shared with the log tail commands of :mod:`node_agent.log_commands`).
"""

from __future__ import annotations

import logging
import queue
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from node_agent.command_gate import MAX_AGE_S, MAX_IDS, CommandGate
from node_agent.models import NODE, ObservedContainer
from node_agent.plan import is_own_container
from phrame.mqtt import Message
from schemas import Topics

log = logging.getLogger(__name__)


class Restarter(Protocol):
    def list_containers(self) -> list[ObservedContainer]: ...
    def restart(self, name: str) -> None: ...


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
        gate: CommandGate | None = None,
    ) -> None:
        self.topics = topics
        self.node = node
        self.docker = docker
        self.own_container_id = own_container_id
        self.gate = gate or CommandGate(max_age_s=max_age_s, clock=clock, max_ids=max_ids)
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()

    def accept(self, msg: Message) -> bool:
        """Queue a valid, fresh, new restart command for this node; return False (logged) otherwise."""
        admitted = self.gate.admit(msg, self.topics, self.node, "restart")
        if admitted is None:
            return False
        self._queue.put(admitted[0])
        return True

    @property
    def seen(self) -> OrderedDict[str, float]:
        return self.gate.seen

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
