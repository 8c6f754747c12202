"""The agent's loop: triggers in, one reconcile pass at a time, actual state out.

``phrame node-agent`` builds an :class:`Agent` and calls :meth:`Agent.run`. MQTT messages
and Docker events only set a trigger (desired messages are debounced); the loop thread
runs every pass, so passes never overlap. It never dies from one failure: it logs,
reports on the node status and tries again on the next trigger or resync.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from typing import Any

from node_agent.desired import DesiredStore
from node_agent.docker_port import DockerPort, detect_own_container_id
from node_agent.errors import AgentError
from node_agent.models import NODE, ObservedProcess
from node_agent.processes import Supervisor
from node_agent.reconcile import Reconciler
from node_agent.reporting import Reporter
from node_agent.settings import AgentSettings
from phrame_mqtt import Message, MqttClient, MqttError, MqttSettings, Will
from schemas import PayloadError, Topics, check_payload

log = logging.getLogger(__name__)


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        *,
        docker: DockerPort,
        supervisor: Supervisor,
        desired_mqtt: MqttSettings,
        actual_mqtt: MqttSettings,
        own_container_id: str | None = None,
    ) -> None:
        self.settings = settings
        self.node = settings.node
        self.topics = Topics(settings.topic_prefix)
        self.docker = docker
        self.store = DesiredStore(self.topics, self.node, max_payload_bytes=settings.max_payload_bytes)
        self.reconciler = Reconciler(
            self.node,
            docker,
            supervisor=supervisor,
            parallelism=settings.parallelism,
            own_container_id=own_container_id,
        )
        self.supervisor = supervisor
        self.stop_event = threading.Event()
        self._trigger = threading.Event()
        self._last_message = 0.0
        self._reconnected = False
        self._restarts: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._events: Any = None
        self.applied: tuple[int, str] | None = None
        self.passes = 0
        self._processes: dict[str, ObservedProcess] = {}
        self._counts: dict[str, int] = {}
        base = f"phrame-agent-{self.node}"
        self.actual_client = MqttClient(
            actual_mqtt, base + "-actual", will=self._will(), on_connect=self._on_actual_connect
        )
        self.desired_client = MqttClient(desired_mqtt, base + "-desired", on_connect=self.wake)
        self.reporter = Reporter(
            self.actual_client,
            self.topics,
            self.node,
            inspect=docker.inspect_container,
            state_dir=settings.state_dir,
        )

    def _will(self) -> Will:
        payload = json.dumps({"state": "offline", "agent": "node-agent"}).encode()
        return Will(self.topics.status(self.node), payload, retain=True, qos=1)

    # -- triggers (called from other threads: only set flags)
    def wake(self) -> None:
        self._trigger.set()

    def _on_actual_connect(self) -> None:
        self._reconnected = True  # the broker may have lost our retained state
        self._trigger.set()

    def _on_desired(self, msg: Message) -> None:
        self.store.apply(msg.topic, msg.payload)
        self._last_message = time.monotonic()
        self._trigger.set()

    def _on_cmd(self, msg: Message) -> None:
        try:
            topic = self.topics.parse(msg.topic)
            if topic.kind != "restart" or topic.node != self.node or not topic.item_id:
                raise ValueError(f"{msg.topic}: not a command for node {self.node}")
            check_payload("cmd-restart", json.loads(msg.payload or b"{}"))
        except (ValueError, PayloadError) as e:
            log.warning("refused command on %s: %s", msg.topic, e)
            return
        self._restarts.put(topic.item_id)
        self._trigger.set()

    def _watch_events(self) -> None:
        backoff = 1.0
        while not self.stop_event.is_set():
            try:
                self._events = self.docker.events()
                for _event in self._events:
                    self._trigger.set()
                backoff = 1.0
            except Exception as e:  # the daemon restarted or the stream broke
                if self.stop_event.is_set():
                    return
                log.warning("node %s: Docker event stream failed: %s", self.node, e)
            self.stop_event.wait(backoff)
            backoff = min(30.0, backoff * 2)

    # -- the loop
    def run(self) -> int:
        self.actual_client.start()
        self.desired_client.start()
        self.desired_client.subscribe(self.topics.desired_node_filter(self.node), self._on_desired)
        self.desired_client.subscribe(self.topics.cmd_node_filter(self.node), self._on_cmd)
        threading.Thread(target=self._watch_events, name="docker-events", daemon=True).start()
        log.info("node agent for %s running", self.node)
        self._last_message = time.monotonic()  # let the retained messages arrive first
        self._trigger.set()
        next_resync = time.monotonic() + self.settings.resync_s
        next_heartbeat = time.monotonic()
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if now >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = now + self.settings.heartbeat_s
                quiet_at = self._last_message + self.settings.debounce_s
                if (self._trigger.is_set() and now >= quiet_at) or now >= next_resync:
                    self._trigger.clear()
                    self.run_pass()
                    next_resync = self._next_resync()
                    continue
                until = min(next_heartbeat, next_resync)
                if self._trigger.is_set():
                    self.stop_event.wait(max(0.0, min(until, quiet_at) - now))
                else:
                    self._trigger.wait(max(0.0, until - now))
        finally:
            self._shutdown()
        return 0

    def _next_resync(self) -> float:
        now = time.monotonic()
        at = now + self.settings.resync_s
        retry = self.supervisor.next_retry()
        if retry is not None:
            at = min(at, max(retry, now + 0.1))
        if any(p.state == "running" and not p.is_stable for p in self._processes.values()):
            at = min(at, now + 1.0)  # a handover counts consecutive checks: check soon
        return at

    def run_pass(self) -> None:
        self.passes += 1
        if self._reconnected:
            self._reconnected = False
            self.reporter.forget()
        self._handle_restarts()
        desired = self.store.snapshot()
        try:
            result = self.reconciler.run_pass(desired)
            actual = self.reconciler.observe() if result.outcomes else result.actual
        except AgentError as e:
            log.error("node %s: pass failed: %s", self.node, e)
            self.reporter.report_status("online", applied=self.applied, errors=[str(e)])
            return
        self._processes = dict(actual.processes)
        mine = [c for c in actual.containers.values() if c.labels.get(NODE) == self.node]
        self._counts = {
            "containers": len(mine),
            "containers_running": sum(c.state == "running" for c in mine),
            "networks": len(actual.networks),
            "processes": len(actual.processes),
            "processes_running": sum(p.state == "running" for p in actual.processes.values()),
        }
        converged = result.converged and desired.is_complete
        if converged and desired.manifest is not None:
            self.applied = (desired.manifest.generation, desired.manifest.commit)
        errors = list(result.errors) + sorted(self.store.errors().values())
        item_errors = {o.action.target: o.error for o in result.outcomes if o.error}
        try:
            self.reporter.report_items(desired, actual, item_errors)
            self.reporter.report_status("online", applied=self.applied, converged=converged, errors=errors)
        except MqttError as e:
            log.warning("node %s: cannot publish actual state: %s", self.node, e)
        if result.plan.actions:
            log.info(
                "node %s: pass %d ran %d actions, %d failed",
                self.node,
                self.passes,
                len(result.outcomes),
                sum(not o.ok for o in result.outcomes),
            )

    def _handle_restarts(self) -> None:
        while not self._restarts.empty():
            item_id = self._restarts.get()
            mine = {c.name: c for c in self.docker.list_containers()}
            c = mine.get(item_id)
            if c is None or c.labels.get(NODE) != self.node:
                log.warning("refused restart of %s: not a managed container of %s", item_id, self.node)
                continue
            try:
                self.docker.restart(c.id)
                log.info("restarted %s on request", item_id)
            except AgentError as e:
                log.warning("restart of %s failed: %s", item_id, e)

    def _heartbeat(self) -> None:
        desired = self.store.snapshot()
        counts = {f"desired_{k}": len(desired.kind(k)) for k in ("containers", "networks", "processes")}
        counts |= self._counts | {"passes": self.passes}
        try:
            self.reporter.heartbeat(self.settings.heartbeat_s, counts)
        except MqttError as e:
            log.warning("node %s: heartbeat not sent: %s", self.node, e)

    def _shutdown(self) -> None:
        """Say offline, leave containers and processes running, disconnect."""
        events = self._events
        if events is not None and hasattr(events, "close"):
            with contextlib.suppress(Exception):  # already closed by a broken connection
                events.close()
        try:
            payload = self.reporter.status_bytes("offline")
            self.actual_client.publish_batch([(self.topics.status(self.node), payload)], timeout=5)
        except MqttError as e:
            log.warning("node %s: could not publish offline: %s", self.node, e)
        self.desired_client.stop()
        self.actual_client.stop()
        log.info("node agent for %s stopped; containers left running", self.node)

    def stop(self) -> None:
        self.stop_event.set()
        self._trigger.set()


def build_agent(settings: AgentSettings) -> Agent:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    docker = DockerPort(
        settings.node, registry_auth=settings.registry_auth, stop_timeout=settings.stop_timeout_s
    )
    return Agent(
        settings,
        docker=docker,
        supervisor=Supervisor(settings.state_dir, stop_timeout=settings.stop_timeout_s),
        desired_mqtt=MqttSettings.from_env(plane="desired"),
        actual_mqtt=MqttSettings.from_env(plane="actual"),
        own_container_id=detect_own_container_id(),
    )
