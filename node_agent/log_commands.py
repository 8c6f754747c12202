"""Log tail commands: ``phrame/cmd/nodes/<node>/containers/<id>/logs``, answered at once.

The loop feeds each ``logs`` command to :meth:`LogCommands.accept` (MQTT thread) and runs
:meth:`LogCommands.serve` on a thread of its own, so an answer never waits for a pass. The
same :class:`node_agent.command_gate.CommandGate` as restarts drops retained, stale and
repeated commands (no answer: nobody is waiting for a replay). The answer goes to
``phrame/actual/nodes/<node>/replies/<id>`` (QoS 1, never retained) over the connection the
command came in on: the tail of one of this node's managed containers (never the agent's
own), masked and bounded as :mod:`node_agent.container_logs` does, or an ``error``. Read-only:
it never changes a container, and never logs a line of a tail.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node_agent.command_gate import CommandGate
from node_agent.container_logs import secret_values, tail_doc
from node_agent.errors import DockerError
from node_agent.models import NODE, ObservedContainer
from node_agent.plan import is_own_container
from node_agent.sops_secrets import SopsSecrets
from phrame.mqtt import Message
from schemas import Topics, check_payload

log = logging.getLogger(__name__)
DEFAULT_LINES = 50
MAX_LINES = 200
MAX_BYTES = 32 * 1024
WAIT_S = 0.5  # how often the worker looks at its stop event


class LogReader(Protocol):
    def list_containers(self) -> list[ObservedContainer]: ...
    def inspect_container(self, name: str) -> dict[str, Any]: ...
    def logs_tail(self, ref: str, lines: int) -> bytes: ...


class Publisher(Protocol):
    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None: ...


@dataclass(frozen=True)
class LogRequest:
    command_id: str
    item_id: str
    lines: int


def _env_spec(details: Mapping[str, Any]) -> dict[str, Any]:
    """The container's own ``Config.Env`` as a spec's ``env``: plain values of secret-named
    variables are masked even when the desired spec is gone."""
    pairs = ((details.get("Config") or {}).get("Env")) or []
    return {"env": dict(str(p).partition("=")[::2] for p in pairs if "=" in str(p))}


class LogCommands:
    def __init__(
        self,
        topics: Topics,
        node: str,
        docker: LogReader,
        own_container_id: str | None,
        *,
        gate: CommandGate,
        spec_of: Callable[[str], Mapping[str, Any] | None],
        read_secret: Callable[[str], str],
        clock: Callable[[], float] = time.time,
        sops: SopsSecrets | None = None,
    ) -> None:
        """``spec_of``: the desired spec of an item id (its env says which values are
        secret); ``read_secret`` reads a ``{file: NAME}`` value to mask it."""
        self.topics = topics
        self.node = node
        self.docker = docker
        self.own_container_id = own_container_id
        self.gate = gate
        self.spec_of = spec_of
        self.read_secret = read_secret
        self.sops = sops  # decrypts ``{secret: file/key}`` values, to mask them
        self.clock = clock
        self._queue: queue.SimpleQueue[LogRequest] = queue.SimpleQueue()

    def accept(self, msg: Message) -> bool:
        """Queue a valid, fresh, new log command for this node; False (logged) otherwise."""
        admitted = self.gate.admit(msg, self.topics, self.node, "logs")
        if admitted is None:
            return False
        item_id, doc = admitted
        self._queue.put(LogRequest(str(doc["id"]), item_id, int(doc.get("lines", DEFAULT_LINES))))
        return True

    def serve(self, stop: threading.Event, publisher: Publisher) -> None:
        """Answer queued commands until ``stop`` is set (a thread of its own). Never raises."""
        while not stop.is_set():
            try:
                request = self._queue.get(timeout=WAIT_S)
            except queue.Empty:
                continue
            try:
                reply = self.answer(request)
                publisher.publish(
                    self.topics.reply(self.node, request.command_id),
                    json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode(),
                    retain=False,
                    qos=1,
                )
            except Exception as e:  # a bug or the broker away: this answer is lost, the loop goes on
                log.warning("node %s: cannot answer log command %s: %s", self.node, request.command_id, e)

    def answer(self, request: LogRequest) -> dict[str, Any]:
        """The reply document (valid under ``actual-reply``) for ``request``."""
        reply: dict[str, Any] = {
            "id": request.command_id,
            "node": self.node,
            "item": request.item_id,
            "at": self.clock(),
            "lines": [],
            "truncated": False,
        }
        try:
            reply |= self._tail(request)
        except (DockerError, LookupError) as e:
            reply["error"] = str(e)
        check_payload("actual-reply", reply)
        return reply

    def _tail(self, request: LogRequest) -> dict[str, Any]:
        item_id = request.item_id
        # by labels, not by name: with PHRAME_SHARED_DAEMON the name also carries the node
        mine = [c for c in self.docker.list_containers() if c.labels.get(NODE) == self.node]
        found = sorted((c for c in mine if c.item_id == item_id), key=lambda c: c.state != "running")
        if not found:
            log.warning("refused log command for %s: not a managed container of %s", item_id, self.node)
            raise LookupError(f"no managed container {item_id} on node {self.node}")
        c = found[0]
        if is_own_container(c, self.own_container_id):
            log.warning("refused log command for %s: it is the agent's own container", item_id)
            raise LookupError(f"{item_id} is the agent's own container: its log is not sent")
        secrets = secret_values(self.spec_of(item_id), self.read_secret, self.sops)
        secrets += secret_values(_env_spec(self.docker.inspect_container(c.id)), self.read_secret)
        # one line more than asked: whether older lines were left out
        raw = self.docker.logs_tail(c.id, min(request.lines, MAX_LINES) + 1)
        doc = tail_doc(raw, secrets, max_lines=min(request.lines, MAX_LINES), max_bytes=MAX_BYTES)
        log.info("node %s: sent the last %d lines of %s on request", self.node, len(doc["lines"]), item_id)
        return doc
