"""Actual-plane payloads (item state, node status, heartbeat) and publishing only changes.

The loop calls :class:`ActualReporter` after each pass and on the heartbeat timer. Each payload
is validated against its ``schemas`` schema before it leaves; an unchanged payload is not
republished, and an item that vanished is cleared with an empty retained message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from node_agent.container_logs import LogTails, secret_values, wants_logs
from node_agent.errors import DockerError
from node_agent.host_stats import host_stats
from node_agent.models import NODE, ActualState, Clock, DesiredState, ObservedContainer, ObservedProcess
from node_agent.restarts import RestartLog
from node_agent.sops_secrets import SopsSecrets
from schemas import Topics, canonical_json, check_payload
from schemas.container_exits import docker_time
from schemas.node_policy import NodePolicy

AGENT_VERSION = "0.1.0"
Inspect = Callable[[str], Mapping[str, Any]]


class Publisher(Protocol):
    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None: ...


def _no_file(name: str) -> str:
    raise OSError(f"no secrets folder to read {name} from")


def finished_at_of(details: Mapping[str, Any] | None) -> str | None:
    """Docker's ``State.FinishedAt`` (kept while the container runs again); None for its
    zero time (never exited) or anything that is no time."""
    finished = ((details or {}).get("State") or {}).get("FinishedAt")
    return finished if docker_time(finished) is not None else None


def container_payload(
    c: ObservedContainer,
    details: Mapping[str, Any] | None,
    error: str | None,
    restarts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``restarts``: ``last_exit`` and ``agent_restarts`` (:meth:`RestartLog.fields`)."""
    state = (details or {}).get("State") or {}
    return {
        "state": c.state,
        "health": c.health,
        "image": c.image,
        "image_id": c.image_id,
        "digest": c.digest,
        "started_at": state.get("StartedAt"),
        "restart_count": (details or {}).get("RestartCount"),
        "exit_code": state.get("ExitCode", c.exit_code) if c.state != "running" else None,
        "error": error or state.get("Error") or None,
        "finished_at": finished_at_of(details),
        **(restarts or {"last_exit": None, "agent_restarts": 0}),
    }


def process_payload(p: ObservedProcess, error: str | None) -> dict[str, Any]:
    return {
        "state": p.state,
        "health": None,
        "digest": p.digest,
        "pid": p.pid,
        "started_at": p.started_at,
        "restart_count": p.restart_count,
        "exit_code": p.exit_code,
        "error": error or p.error,
    }


def missing_payload(spec: Mapping[str, Any], error: str | None) -> dict[str, Any]:
    return {"state": "missing", "digest": None, "image": spec.get("image"), "error": error}


class ActualReporter:
    """Publishes this node's actual state; remembers what it sent to skip unchanged payloads."""

    def __init__(
        self,
        publisher: Publisher,
        topics: Topics,
        node: str,
        *,
        inspect: Inspect,
        state_dir: Path = Path("/"),
        wall_clock: Clock = time.time,
        logs: LogTails | None = None,
        read_secret: Callable[[str], str] | None = None,
        policy: NodePolicy | None = None,
        sops: SopsSecrets | None = None,
        prefetch: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        """``logs``: failing containers' log tails go with their reports (``read_secret``
        reads a ``{file: NAME}`` env value, to mask it in them); ``policy``: the node policy,
        told in every status so reviews can check a commit against it."""
        self.policy = policy
        self.prefetch = prefetch  # the images pulled ahead of a wave, told in every status
        self.publisher = publisher
        self.wall_clock = wall_clock  # the heartbeat's ts
        self.topics = topics
        self.node = node
        self.inspect = inspect
        self.state_dir = state_dir
        self.sent: dict[str, bytes] = {}
        self.seq = 0
        self.skipped: list[str] = []  # objects of the last report_items that could not be reported
        self._details: dict[str, tuple[tuple[str, str, str | None], Mapping[str, Any]]] = {}
        self.restarts = RestartLog()
        self.logs = logs
        self.read_secret = read_secret
        self.sops = sops  # decrypts ``{secret: file/key}`` values, to mask them in log tails

    def forget(self) -> None:
        """Republish everything next time (after a reconnect: the broker may have lost it)."""
        self.sent.clear()

    def adopt(self, retained: Mapping[str, bytes]) -> None:
        """Take the item reports the broker holds for this node as what was sent: the next
        report sends only differences and clears reports of items that are gone (e.g.
        removed while the agent was down). Status and heartbeat are always sent afresh."""
        self.sent = {t: p for t, p in retained.items() if not t.endswith(("/status", "/heartbeat"))}

    def _send(self, topic: str, schema: str, doc: dict[str, Any] | None) -> bool:
        payload = None if doc is None else canonical_json(doc)
        if self.sent.get(topic, b"") == (payload or b""):
            return False
        if doc is not None:
            check_payload(schema, doc)  # only what leaves is validated: no-op passes stay cheap
        self.publisher.publish(topic, payload, retain=True, qos=1)
        if payload is None:
            self.sent.pop(topic, None)
        else:
            self.sent[topic] = payload
        return True

    def _details_of(self, c: ObservedContainer) -> Mapping[str, Any] | None:
        key = (c.id, c.state, c.health)  # inspect again only when the container changed
        cached = self._details.get(c.id)
        if cached and cached[0] == key:
            return cached[1]
        try:
            details = self.inspect(c.id)
        except DockerError:  # vanished meanwhile, or Docker went away: the next pass reports it
            return None  # (anything else is a bug: it fails the pass, which logs its traceback)
        self._details[c.id] = (key, details)
        return details

    def refresh(self, container_ids: Iterable[str]) -> None:
        """Inspect these containers again at the next report: they stopped or were started
        (a restart keeps the id, the state and the health the cache is keyed by)."""
        for cid in container_ids:
            self._details.pop(cid, None)

    def note_started(self, containers: Iterable[ObservedContainer]) -> None:
        """The pass started these containers (as its list saw them before: exit code)."""
        self.restarts.note_started(containers)

    def report_items(self, desired: DesiredState, actual: ActualState, errors: Mapping[str, str]) -> int:
        """Publish changed item payloads and clear vanished ones; return how many were sent.

        A container is this node's item by its labels (node, and the item id they give),
        whatever its Docker name (``PHRAME_SHARED_DAEMON`` adds the node to it)."""
        wanted: dict[str, dict[str, Any]] = {}
        self.skipped = []
        # running first: should one item have two containers, the live one is reported
        for c in sorted(actual.containers.values(), key=lambda c: (c.state != "running", c.name)):
            if c.labels.get(NODE) != self.node:
                continue
            topic = self._item_topic("containers", c.item_id or c.name)
            if topic and topic not in wanted:
                details = self._details_of(c)
                finished = finished_at_of(details)
                self.restarts.recall(c.id, finished, self.sent.get(topic))  # after an agent restart
                restarts = self.restarts.fields(c.id, finished)
                doc = container_payload(c, details, errors.get(c.item_id or c.name), restarts)
                if self.logs is not None and wants_logs(doc):
                    doc["logs"] = self._logs_of(c, doc, desired.kind("containers").get(c.item_id or c.name))
                wanted[topic] = doc
        for name, net in actual.networks.items():
            ours = net.labels.get(NODE) == self.node or name in desired.networks  # shared daemon
            if ours and (topic := self._item_topic("networks", name)):
                wanted[topic] = {"state": "present", "digest": actual.networks[name].digest}
        for pid, p in actual.processes.items():
            wanted[self.topics.actual_item(self.node, "processes", pid)] = process_payload(p, errors.get(pid))
        for kind in ("containers", "networks", "processes"):
            for item_id, spec in desired.kind(kind).items():
                topic = self.topics.actual_item(self.node, kind, item_id)
                wanted.setdefault(topic, missing_payload(spec, errors.get(item_id)))
        alive = {c.id for c in actual.containers.values()}
        for gone in set(self._details) - alive:
            del self._details[gone]
        self.restarts.keep_only(alive)
        if self.logs is not None:
            self.logs.keep_only(alive)
        sent = sum(self._send(t, "actual-item", doc) for t, doc in sorted(wanted.items()))
        prefix = self.topics.actual_node(self.node) + "/"
        for topic in [t for t in self.sent if t.startswith(prefix) and t not in wanted]:
            if not topic.endswith(("/status", "/heartbeat")):
                sent += self._send(topic, "actual-item", None)
        return sent

    def _logs_of(
        self, c: ObservedContainer, doc: Mapping[str, Any], spec: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The container's log tail, read again when its state, health, exit or restarts change."""
        assert self.logs is not None
        key = tuple(doc.get(k) for k in ("state", "health", "finished_at", "restart_count", "agent_restarts"))
        read = self.read_secret

        def secrets() -> list[str]:
            return secret_values(spec, read if read is not None else _no_file, self.sops)

        return self.logs.of(c.id, key, secrets)

    def _item_topic(self, kind: str, name: str) -> str | None:
        """The actual topic of a managed object, or None (and a note) when its name is no item id."""
        try:
            return self.topics.actual_item(self.node, kind, name)
        except ValueError as e:
            self.skipped.append(f"managed {kind[:-1]} {name!r} not reported: {e}")
            return None

    def report_status(
        self,
        state: str,
        *,
        applied: tuple[int, str] | None = None,
        converged: bool = False,
        errors: list[str] | None = None,
    ) -> bool:
        """``applied`` is the (generation, commit) of the last manifest fully converged."""
        doc: dict[str, Any] = {
            "state": state,
            "agent": AGENT_VERSION,
            "generation": applied[0] if applied else None,
            "commit": applied[1] if applied else None,
            "converged": converged,
            "errors": errors or [],
        }
        if self.policy is not None:
            doc["policy"] = self.policy.to_doc()
        if self.prefetch is not None:
            doc["prefetch"] = dict(self.prefetch())
        return self._send(self.topics.status(self.node), "actual-status", doc)

    def status_bytes(self, state: str, *, reason: str | None = None) -> bytes:
        """A minimal status payload (the MQTT last will, the clean stop's status): ``reason``
        ``lost`` (the will) or ``stopped`` (a clean stop) with ``offline``."""
        doc = {"state": state, "agent": AGENT_VERSION} | ({"reason": reason} if reason else {})
        check_payload("actual-status", doc)
        return json.dumps(doc).encode()

    def heartbeat(self, interval_s: float, counts: Mapping[str, int]) -> None:
        doc = {
            "ts": self.wall_clock(),
            "seq": self.seq,
            "interval_s": interval_s,
            "host": host_stats(self.state_dir),
            "counts": dict(counts),
        }
        self.seq += 1
        check_payload("actual-heartbeat", doc)
        self.publisher.publish(self.topics.heartbeat(self.node), canonical_json(doc), True, 1)
