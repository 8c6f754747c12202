"""Builders of desired-plane payloads for node-agent tests.

Specs are built the way config-sync publishes them (digest of the spec alone, a commit),
validated against the schemas, so a test that passes here would pass against the broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors

from node_agent.docker_port import DockerPort
from node_agent.models import ENVIRONMENT, REPLICA, SERVICE, DesiredState, Manifest
from node_agent.reconcile import NodeReconciler
from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics, check_payload, digest
from tests.support.docker import TEST_LABEL
from tests.support.waiting import wait_for

COMMIT = "0" * 40
# the node policy of agents in tests of other things (processes as root among them); the
# policy itself is tested in tests/integration/test_agent_policy.py
OPEN_POLICY = """\
processes: {allowed: true, users: [root, nobody]}
ports: {all_interfaces: true}
"""


def open_policy_file(folder: Path) -> str:
    """A policy file in ``folder`` allowing what tests of other things ask of the host."""
    path = folder / "policy.yaml"
    path.write_text(OPEN_POLICY)
    return str(path)


def restart_payload(*, ts: float | None = None, command_id: str | None = None) -> bytes:
    """A restart command as the topic API sends it: a fresh ``ts`` and a new ``id``."""
    doc = {
        "requested_by": "test",
        "id": command_id or uuid.uuid4().hex,
        "ts": time.time() if ts is None else ts,
    }
    check_payload("cmd-restart", doc)
    return json.dumps(doc).encode()


def _finish(spec: dict[str, Any], schema: str, commit: str) -> dict[str, Any]:
    spec["digest"] = digest(spec)
    spec["commit"] = commit
    check_payload(schema, spec)
    return spec


def container(
    env: str, service: str, replica: int = 0, /, *, image: str = "img:1", commit: str = COMMIT, **kw: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": "container",
        "name": f"{env}.{service}.{replica}",
        "environment": env,
        "service": service,
        "replica": replica,
        "image": image,
        "command": None,
        "env": {},
        "ports": [],
        "volumes": [],
        "networks": [],
        "restart": "no",
        "depends_on": [],
        "labels": {},
    }
    spec.update(kw)
    return _finish(spec, "desired-container", commit)


def network(env: str, name: str, /, *, commit: str = COMMIT, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": "network",
        "name": f"{env}.{name}",
        "environment": env,
        "network": name,
        "driver": "bridge",
        "labels": {},
    }
    spec.update(kw)
    return _finish(spec, "desired-network", commit)


def process(
    env: str, service: str, command: list[str], replica: int = 0, /, *, commit: str = COMMIT, **kw: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": "process",
        "name": f"{env}.{service}.{replica}",
        "environment": env,
        "service": service,
        "replica": replica,
        "command": command,
    }
    spec.update(kw)
    return _finish(spec, "desired-process", commit)


def item_labels(item_id: str) -> dict[str, str]:
    """The labels that identify a container of ``item_id`` (``<env>.<service>.<replica>``),
    as the agent sets them: for building observed containers in unit tests."""
    env, service, replica = item_id.split(".")
    return {ENVIRONMENT: env, SERVICE: service, REPLICA: replica}


def kind_of(spec: dict[str, Any]) -> str:
    return {"container": "containers", "network": "networks", "process": "processes"}[spec["kind"]]


def manifest(specs: list[dict[str, Any]], generation: int = 1, commit: str = COMMIT) -> dict[str, Any]:
    doc = {
        "generation": generation,
        "commit": commit,
        "items": {f"{kind_of(s)}/{s['name']}": s["digest"] for s in specs},
    }
    check_payload("desired-manifest", doc)
    return doc


def desired(
    specs: list[dict[str, Any]], *, with_manifest: bool | list[dict[str, Any]] = False
) -> DesiredState:
    """A DesiredState of ``specs``; ``with_manifest`` True lists them all, or a list names the
    manifest's specs (which may differ from those received)."""
    man = None
    if with_manifest is not False:
        listed = specs if with_manifest is True else with_manifest
        doc = manifest(listed)
        man = Manifest(doc["generation"], doc["commit"], doc["items"])
    by_kind: dict[str, dict[str, Any]] = {"containers": {}, "networks": {}, "processes": {}}
    for s in specs:
        by_kind[kind_of(s)][s["name"]] = s
    return DesiredState(
        containers=by_kind["containers"],
        networks=by_kind["networks"],
        processes=by_kind["processes"],
        manifest=man,
    )


def topics_doc(
    node: str, specs: list[dict[str, Any]], *, with_manifest: bool = True, prefix: str = "phrame"
) -> dict[str, Any]:
    """The ``phrame render --format topics`` shape for one node: {topic: payload}."""
    t = Topics(prefix)
    out: dict[str, Any] = {t.desired_item(node, kind_of(s), s["name"]): s for s in specs}
    if with_manifest:
        out[t.manifest(node)] = manifest(specs)
    return out


def topic_messages(doc: dict[str, Any]) -> dict[str, bytes]:
    return {topic: json.dumps(payload).encode() for topic, payload in doc.items()}


class AgentEnv:
    """One test's namespace: a unique node name, environment name and test label."""

    def __init__(self, client: docker.DockerClient, image: str, label: str) -> None:
        self.client = client
        self.image = image
        self.label = label
        tag = uuid.uuid4().hex[:8]
        self.node = f"node-{tag}"
        self.env = f"t{tag}"

    def container(self, service: str, replica: int = 0, **kw: Any) -> dict[str, Any]:
        kw.setdefault("command", ["sleep", "3600"])
        kw.setdefault("image", self.image)
        kw["labels"] = {TEST_LABEL: self.label, **kw.get("labels", {})}
        return container(self.env, service, replica, **kw)

    def network(self, name: str, **kw: Any) -> dict[str, Any]:
        return network(self.env, name, labels={TEST_LABEL: self.label}, **kw)

    def reconciler(self, node: str | None = None, **kw: Any) -> NodeReconciler:
        port = DockerPort(node or self.node, client=self.client, stop_timeout=1)
        return NodeReconciler(node or self.node, port, **kw)

    def get(self, name: str) -> Any:
        return self.client.containers.get(name)

    def exists(self, name: str) -> bool:
        try:
            self.client.containers.get(name)
            return True
        except docker.errors.NotFound:
            return False

    def managed(self) -> list[Any]:
        """Every container labelled with this test's node, running or not."""
        selector = {"label": f"io.phrame.node={self.node}"}
        # ignore_removed: one can vanish between the list and its inspect (a killed create)
        return list(self.client.containers.list(all=True, filters=selector, ignore_removed=True))

    def process_env(self, state_dir: str, **extra: str) -> dict[str, str]:
        """Environment for a ``phrame node-agent`` subprocess acting as this test's node."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        env.update(
            PHRAME_NODE_NAME=self.node,
            PHRAME_STATE_DIR=state_dir,
            PHRAME_STOP_TIMEOUT_S="1",
            PHRAME_HEARTBEAT_S="0.5",
            PHRAME_RESYNC_S="1",
            PHRAME_POLICY_FILE=open_policy_file(Path(state_dir).parent),
        )
        env.update(extra)
        return env


class RecordingPort(DockerPort):
    """The real :class:`DockerPort`, noting which node's object each changing call acted on
    (looked up by its labels just before the call), so a test can assert that an agent
    never touched another node's containers or networks."""

    _CONTAINER_CALLS = ("start", "restart", "stop", "kill", "remove_container")
    _NETWORK_CALLS = ("remove_network", "disconnect_container_from_network")

    def __init__(self, node: str, **kw: Any) -> None:
        super().__init__(node, **kw)
        self.touched: list[tuple[str, str, str | None]] = []  # (call, object name, its node)
        self._touch_lock = threading.Lock()

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        name = getattr(fn, "__name__", "")
        if args and name in (*self._CONTAINER_CALLS, *self._NETWORK_CALLS):
            self._note(name, str(args[0]), container=name in self._CONTAINER_CALLS)
        if name == "connect_container_to_network" and args:
            self._note(name, str(args[0]), container=True)
        return super()._call(what, fn, *args, **kw)

    def _note(self, call: str, ref: str, *, container: bool) -> None:
        try:
            attrs = (self.api.inspect_container if container else self.api.inspect_network)(ref)
        except docker.errors.NotFound:
            return  # already gone: nobody's object
        labels = (attrs.get("Config") or {}).get("Labels") if container else attrs.get("Labels")
        name = str(attrs.get("Name") or ref).lstrip("/")
        with self._touch_lock:
            self.touched.append((call, name, (labels or {}).get("io.phrame.node")))

    def assert_only_touched_own(self) -> None:
        foreign = [t for t in self.touched if t[2] != self.node]
        assert not foreign, f"node {self.node} acted on objects that are not its own: {foreign}"


class ActualWatcher:
    """Subscribes to one node's actual plane and keeps the latest payload of every topic."""

    def __init__(self, url: str, node: str) -> None:
        self.topics = Topics()
        self.node = node
        self.latest: dict[str, Any] = {}
        self.counts: dict[str, int] = {}  # messages received per topic
        self._cond = threading.Condition()
        self.client = MqttClient(MqttSettings(url=url), f"watch-{uuid.uuid4().hex[:8]}")
        self.client.start()
        self.client.subscribe(self.topics.actual_filter(node), self._on)
        self.client.subscribe(self.topics.cmd_node_filter(node), lambda _m: None)

    def _on(self, msg: Any) -> None:
        with self._cond:
            self.latest[msg.topic] = json.loads(msg.payload) if msg.payload else None
            self.counts[msg.topic] = self.counts.get(msg.topic, 0) + 1
            self._cond.notify_all()

    def status(self) -> Any:
        return self.latest.get(self.topics.status(self.node))

    def item(self, kind: str, item_id: str) -> Any:
        return self.latest.get(self.topics.actual_item(self.node, kind, item_id))

    def wait_for(self, predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
        """:func:`tests.support.waiting.wait_for`, naming the node's last status on a timeout."""

        def holds() -> object:
            with self._cond:  # the predicate reads what the network thread writes
                return predicate()

        wait_for(holds, what, timeout, observe=lambda: f"status={self.status()}")

    def passes(self) -> int:
        """The agent's pass counter, as its last heartbeat carried it (0 before any)."""
        beat = self.latest.get(self.topics.heartbeat(self.node)) or {}
        return int((beat.get("counts") or {}).get("passes", 0))

    def wait_passes(self, more: int = 2, timeout: float = 30.0) -> None:
        """Wait until ``more`` passes began after now: all but the last of them have finished.

        (The counter counts a pass when it starts; ``more=2`` means one whole pass ran.)"""
        start = self.passes()
        self.wait_for(
            lambda: self.passes() >= start + more, timeout, f"{more} more agent passes after {start}"
        )

    def publish(self, doc: dict[str, Any]) -> None:
        """Publish ``{topic: payload}`` retained (payload None clears), waiting for PUBACKs."""
        items = [(t, None if p is None else json.dumps(p).encode()) for t, p in doc.items()]
        self.client.publish_batch(items)

    def stop(self) -> None:
        self.client.stop()


class AgentProcess:
    """``phrame node-agent`` as a subprocess; stopped with SIGTERM (SIGKILL after 20 s)."""

    def __init__(self, env: dict[str, str], log_path: str) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 -- closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "phrame", "node-agent"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")
