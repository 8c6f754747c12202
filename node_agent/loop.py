"""The agent's loop: triggers in, one reconcile pass at a time, actual state out.

``phrame node-agent`` builds an :class:`Agent` and calls :meth:`Agent.run`. MQTT messages
and Docker events only add the node's one key to a :class:`phrame.runtime.Runner` whose
work runs on the calling thread, so passes never overlap; a pass waits until desired
messages pause for ``debounce_s`` (``manifest_wait_s`` while the desired state holds an
item and a manifest that disagree: the rest of a change is on its way; never past a due
resync; at once when the message just completed a new generation: its manifest and every
item it lists are in), and each pass says when the
next is due (``resync_s``, sooner while something settles). It never dies from one
failure: it logs, reports on the node status and tries again on the next trigger or resync.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from typing import Any

from node_agent.commands import RestartCommands
from node_agent.container_logs import LogTails
from node_agent.desired import DesiredStore
from node_agent.desired_reread import DesiredReread
from node_agent.errors import AgentError, DockerError
from node_agent.handover import wanted
from node_agent.log_commands import LogCommands
from node_agent.metrics import AgentMetrics
from node_agent.models import NETWORK_OPS, NODE, Clock, DesiredState, ObservedProcess, Op
from node_agent.ports import AgentRuntime
from node_agent.prefetch import Prefetcher, PullSlots
from node_agent.processes import ProcessSupervisor
from node_agent.reconcile import NodeReconciler, PassResult
from node_agent.reporting import ActualReporter
from node_agent.restarts import started_containers
from node_agent.saved_state import SavedState, SavedStateError
from node_agent.secret_files import read_secret
from node_agent.settings import AgentSettings
from node_agent.sops_secrets import SopsSecrets
from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings, Will
from phrame.runtime import Runner, backoff
from schemas import Topics

log = logging.getLogger(__name__)
#: the longest wait between two tries to reopen Docker's event stream: how long the return
#: of a restarted daemon can go unnoticed (a try is one connection to the daemon's socket)
EVENTS_RETRY_MAX_S = 2.0
KEY = "node"  # the agent's one key: every trigger asks for a pass over the whole node


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        *,
        docker: AgentRuntime,
        supervisor: ProcessSupervisor,
        desired_mqtt: MqttSettings,
        actual_mqtt: MqttSettings,
        own_container_id: str | None = None,
        wall_clock: Clock = time.time,
        timer: Clock = time.monotonic,
    ) -> None:
        self.settings = settings
        self.timer = timer
        self.node = settings.node
        self.topics = Topics(settings.topic_prefix)
        self.docker = docker
        self.store = DesiredStore(self.topics, self.node, max_payload_bytes=settings.max_payload_bytes)
        self.reread = DesiredReread(settings.desired_reread_s, clock=timer)
        slots = PullSlots(settings.pull_parallelism)
        self.prefetcher = Prefetcher(lambda image: docker.ensure_image(image), slots, on_change=self.wake)
        self.reconciler = NodeReconciler(
            self.node,
            docker,
            supervisor=supervisor,
            parallelism=settings.parallelism,
            own_container_id=own_container_id,
            shared_daemon=settings.shared_daemon,
            policy=settings.policy,
            pull_slots=slots,
        )
        self.supervisor = supervisor
        self.stop_event = threading.Event()
        self.runner: Runner[str] = Runner(
            f"agent-{self.node}", self._sync, clock=timer, resync_s=settings.resync_s, resync=lambda: (KEY,)
        )
        self._last_message = 0.0
        self._next_resync = 0.0  # when a pass runs although desired messages keep coming
        # a generation whose manifest and items are all in, not yet handed to a pass: the
        # next pass runs at once, without the debounce (nothing more is needed for it)
        self._complete: int | None = None
        self._acted: int | None = None  # the last complete generation a pass was started for
        self._reconnected = False
        self._connected = False
        self._online = threading.Event()  # connected and subscribed: the broker's plane rules
        self._start_settled = threading.Event()  # online, the connector gave up, or stop()
        self._connect_error: BaseException | None = None
        self.saved = SavedState(settings.state_dir, self.node)
        # the saved desired state while the agent started without a broker (None: the broker's)
        self.offline_desired: DesiredState | None = None
        self._mode_lock = threading.Lock()  # the connector's switch against the offline start
        self._wall_clock = wall_clock
        self.commands = RestartCommands(
            self.topics,
            self.node,
            docker,
            own_container_id,
            max_age_s=settings.command_max_age_s,
            clock=wall_clock,
        )
        self.log_commands = LogCommands(
            self.topics,
            self.node,
            docker,
            own_container_id,
            gate=self.commands.gate,
            spec_of=lambda item_id: self.store.snapshot().containers.get(item_id),
            read_secret=functools.partial(read_secret, settings.secrets_dir),
            clock=wall_clock,
            sops=SopsSecrets(settings.age_keys),
        )
        self._events: Any = None
        self._stopped: set[str] = set()  # containers a die/destroy event named, for the next pass
        self._stopped_lock = threading.Lock()
        self._heartbeats: threading.Thread | None = None
        self.applied: tuple[int, str] | None = None
        self.passes = 0
        self._processes: dict[str, ObservedProcess] = {}
        self._counts: dict[str, int] = {}
        self._check_soon = False  # the last pass waits on something another agent finishes
        # passes in a row that failed or had a failed action: the next is tried after a
        # backoff from 1 s (capped by the resync), as what failed can pass with no container
        # event to say so (an image appearing, a dependency started by its restart policy)
        self._failed_passes = 0
        self.metrics = AgentMetrics(self.node)
        self._last: tuple[PassResult | None, bool] = (None, False)  # this pass's result, for metrics
        # One connection per broker: the generated broker config makes the user name the
        # client id, so two connections of node-<node> to one broker would take each other over.
        base = f"phrame-agent-{self.node}"
        same = desired_mqtt == actual_mqtt
        self.actual_client = MqttClient(
            actual_mqtt,
            base if same else base + "-actual",
            will=self._will(),
            on_connect=self._on_actual_connect,
        )
        self.desired_client = (
            self.actual_client if same else MqttClient(desired_mqtt, base + "-desired", on_connect=self.wake)
        )
        self.reporter = ActualReporter(
            self.actual_client,
            self.topics,
            self.node,
            inspect=docker.inspect_container,
            state_dir=settings.state_dir,
            wall_clock=wall_clock,
            logs=LogTails(docker.logs_tail),
            read_secret=functools.partial(read_secret, settings.secrets_dir),
            policy=settings.policy,
            sops=SopsSecrets(settings.age_keys),
            prefetch=self.prefetcher.report if settings.pull_ahead else None,
        )

    def _will(self) -> Will:
        # "lost": the broker sends this when the connection drops without a goodbye (the
        # containers presumably still run); a clean stop says "stopped" itself (_shutdown)
        payload = json.dumps({"state": "offline", "agent": "node-agent", "reason": "lost"}).encode()
        return Will(self.topics.status(self.node), payload, retain=True, qos=1)

    # -- triggers (called from other threads: only add the key)
    def wake(self) -> None:
        self.runner.queue.add(KEY)

    def _on_actual_connect(self) -> None:
        self._reconnected = True  # the broker may have lost our retained state
        self.wake()

    def _on_desired(self, msg: Message) -> None:
        changed = self.store.apply(msg.topic, msg.payload, retained=msg.retain)
        self._last_message = self.timer()
        if changed:
            generation = self.store.complete_generation()
            if generation is not None and generation != self._acted:
                self._complete = generation
        self.wake()

    def _on_cmd(self, msg: Message) -> None:
        if msg.topic.endswith("/logs"):  # answered by its own thread at once, not by a pass
            self.log_commands.accept(msg)
        elif self.commands.accept(msg):
            self.wake()

    def _watch_events(self) -> None:
        failures = 0  # tries in a row that found no stream
        lost: float | None = None  # since when the stream is broken: Docker's doings unseen
        said = False  # that it broke, in this outage
        while not self.stop_event.is_set():
            try:
                self._events = self.docker.events()
                if lost is not None:  # the daemon answers again (a restart): a pass at once,
                    # not at the resync; a pass that failed meanwhile waits for no other trigger
                    log.info(
                        "node %s: the Docker daemon answers again (after %.1f s)",
                        self.node,
                        time.monotonic() - lost,
                    )
                    lost, said = None, False
                    self.wake()
                for event in self._events:
                    if event.get("Action") in ("die", "destroy") and event.get("id"):
                        with self._stopped_lock:
                            self._stopped.add(str(event["id"]))
                    self.wake()
                failures = 0
            except Exception as e:  # the daemon restarted or the stream broke
                if self.stop_event.is_set():
                    return
                # said once per outage: the tries go on every EVENTS_RETRY_MAX_S at most
                (log.debug if said else log.warning)("node %s: Docker event stream failed: %s", self.node, e)
                said = True
            if lost is None:  # a pass now: with no daemon it fails and says so on the
                # status (with --live-restore no die event comes, and the resync is far)
                lost = time.monotonic()
                self.wake()
            failures += 1
            self.stop_event.wait(backoff(failures, base=1.0, cap=EVENTS_RETRY_MAX_S))

    # -- the loop
    def run(self) -> int:
        connector = threading.Thread(target=self._connect_and_listen, name="mqtt-connect", daemon=True)
        connector.start()
        bound = self.settings.offline_start_s
        if not (bound > 0 and not self._start_settled.wait(bound) and self._start_offline()):
            connector.join()  # as long as the broker takes (a host may boot before it)
            if self._connect_error is not None:
                raise self._connect_error
            if not self._online.is_set():
                return 0  # stopped before it reached the broker
        threading.Thread(target=self._watch_events, name="docker-events", daemon=True).start()
        own = self.reconciler.own_container_id
        where = f"in container {own[:12]}, which it never touches" if own else "on the host"
        log.info("node agent for %s running %s", self.node, where)
        self._next_resync = self.timer() + self.settings.resync_s
        self.wake()
        try:
            self.runner.run()  # until stop()
        finally:
            self._shutdown()
        if self._connect_error is not None:  # a refused login while it ran on the saved state
            raise self._connect_error
        return 0

    def _connect_and_listen(self) -> None:
        """The connector thread: connect both planes, then subscribe and start what needs
        the broker. While it waits, the loop may run on the saved desired state."""
        try:
            if not self._connect():
                self._start_settled.set()
                return
        except BaseException as e:  # a refused login: run() raises it
            self._connect_error = e
            self.stop()
            return
        self._last_message = self.timer()  # let the retained messages arrive first
        self.desired_client.subscribe(self.topics.desired_node_filter(self.node), self._on_desired)
        self.desired_client.subscribe(self.topics.cmd_node_filter(self.node), self._on_cmd)
        # replies go back over the connection the commands come in on (where the API listens)
        serve_logs = functools.partial(self.log_commands.serve, self.stop_event, self.desired_client)
        threading.Thread(target=serve_logs, name="log-commands", daemon=True).start()
        # Heartbeats have their own thread: a long pass (pulls, wait_ready) must not stop them.
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._heartbeats.start()
        with self._mode_lock:
            if self.offline_desired is not None:
                log.info(
                    "node %s: reached the broker; its desired plane replaces the saved state from now on",
                    self.node,
                )
                self.offline_desired = None
            self._online.set()
        self._start_settled.set()
        self.wake()

    def _start_offline(self) -> bool:
        """No broker within the bound: run on the saved desired state if a sound one is saved
        (True), or say why not and wait for the broker (False)."""
        if self.stop_event.is_set():
            return False
        try:
            saved = self.saved.load()
        except SavedStateError as e:
            log.error(
                "node %s: saved desired state refused, not applied: %s; waiting for the broker", self.node, e
            )
            return False
        if saved is None or saved.manifest is None:
            log.info("node %s: no broker and no saved desired state; waiting for the broker", self.node)
            return False
        with self._mode_lock:
            if self._online.is_set():  # it answered meanwhile
                return False
            self.offline_desired = saved
        log.warning(
            "node %s: no broker within %.1f s; converging to the saved desired state "
            "(generation %d, commit %s, %d items) while it keeps trying",
            self.node,
            self.settings.offline_start_s,
            saved.manifest.generation,
            saved.manifest.commit[:12],
            len(saved.manifest.items),
        )
        return True

    def _sync(self, key: str) -> None:
        """The runner's sync: a pass once desired messages paused (or a resync is due), then
        the key again for when the next pass is due."""
        now = self.timer()
        quiet_at = self._last_message + self.settings.debounce_s
        complete, self._complete = self._complete, None
        if complete is None and now >= quiet_at and self._between_item_and_manifest():
            # the rest of a change is on its way: one pass (and one status) once it is in
            quiet_at = max(quiet_at, self._last_message + self.settings.manifest_wait_s)
        if complete is None and now < quiet_at and now < self._next_resync:
            # more may be on the way: one pass for all
            self.runner.queue.add(key, min(quiet_at, self._next_resync) - now)
            return
        if complete is not None:
            self._acted = complete
        self.run_pass()
        self._next_resync = self._next_resync_at()
        self.runner.queue.add(key, max(0.0, self._next_resync - self.timer()))

    def _between_item_and_manifest(self) -> bool:
        """The broker's desired state lists items it does not hold as listed (an item newer
        than its manifest, or a manifest newer than its items): a change is still arriving.
        Never while running on the saved state (no broker to wait for)."""
        if self.offline_desired is not None:
            return False
        return self.store.snapshot().manifest is not None and self.store.is_waiting()

    def _connect(self) -> bool:
        """Connect both planes, however long the broker takes (a host may boot before it);
        False when stopped first. A refused login raises: waiting would not fix it."""
        try:
            for client in {id(c): c for c in (self.actual_client, self.desired_client)}.values():
                if self.stop_event.is_set():  # a SIGTERM between the two: stop() found nothing to stop
                    raise MqttError("stopped before connecting")
                client.start(timeout=None)
        except MqttError:
            if not self.stop_event.is_set():
                self.actual_client.stop()
                raise
            log.info("node agent for %s stopped before it reached the broker", self.node)
            self.actual_client.stop()
            self.desired_client.stop()
            return False
        self._connected = True
        return True

    def _next_resync_at(self) -> float:
        now = self.timer()
        at = now + self.settings.resync_s
        retry = self.supervisor.next_retry()
        if retry is not None:
            at = min(at, max(retry, now + 0.1))
        if any(p.state == "running" and not p.is_stable for p in self._processes.values()):
            at = min(at, now + 1.0)  # a handover counts consecutive checks: check soon
        reread = self.reread.next_at()
        if reread is not None:
            at = min(at, max(reread, now + 0.1))
        if self._check_soon:  # e.g. another node's duplicate network: no event says it is gone
            at = min(at, now + 1.0)
        if self._failed_passes:
            at = min(at, now + backoff(self._failed_passes, base=1.0, cap=self.settings.resync_s))
        return at

    def run_pass(self) -> None:
        """One pass; never raises: a failure is logged, reported on the status, retried later."""
        self.passes += 1
        started, failed, self._last = time.monotonic(), True, (None, False)
        try:
            self._pass()
            failed = False
            result = self._last[0]
            failed_actions = result is not None and any(not o.ok for o in result.outcomes)
            self._failed_passes = self._failed_passes + 1 if failed_actions else 0
        except Exception as e:  # one bad item or a Docker outage must not end the loop
            if isinstance(e, AgentError):
                log.error("node %s: pass %d failed: %s", self.node, self.passes, e)
            else:
                log.exception("node %s: pass %d failed", self.node, self.passes)
            self._failed_passes += 1
            why = str(e) if isinstance(e, AgentError) else f"{type(e).__name__}: {e}"
            try:
                self.reporter.report_status("online", applied=self.applied, errors=[f"pass failed: {why}"])
            except Exception as report_error:
                log.warning("node %s: cannot report the failure: %s", self.node, report_error)
        finally:
            self.metrics.record_pass(time.monotonic() - started, *self._last, failed=failed)

    def _pass(self) -> None:
        if self._reconnected:
            self._reconnected = False
            self.reporter.forget()
            try:  # what the broker holds now: stale reports get cleared, lost ones resent
                held = self.actual_client.collect_retained(self.topics.actual_filter(self.node), timeout=5)
                self.reporter.adopt(held)
            except MqttError as e:
                log.warning("node %s: cannot read back its reports (%s); republishing all", self.node, e)
        restart_errors = self.commands.run()
        with self._stopped_lock:
            stopped, self._stopped = self._stopped, set()
        if stopped:  # the list lags the event: read it once it agrees (a killed one is restarted now)
            try:
                self.docker.settle(stopped)
            except DockerError as e:  # the pass below meets the same outage and reports it
                log.debug("node %s: cannot wait for stopped containers: %s", self.node, e)
        offline = self.offline_desired
        if offline is None and self.reread.due(waiting=self.store.is_waiting()):
            self._read_desired_back()
        desired = offline if offline is not None else self.store.snapshot()
        if offline is None and self.settings.pull_ahead:  # beside the pass; a finished one wakes it
            self.prefetcher.want(self.store.prefetch())
        result = self.reconciler.run_pass(desired)
        # a pending change, or a network just created (a rival one may appear after it), is
        # looked at again soon: no Docker event would bring the pass that finishes it
        self._check_soon = bool(result.plan.pending) or any(
            o.action.op is Op.CREATE_NETWORK for o in result.outcomes
        )
        # what the reports show: looked at again after acting; the networks only if it acted on one
        networks_unchanged = not any(o.action.op in NETWORK_OPS for o in result.outcomes)
        actual = (
            self.reconciler.observe(networks_from=result.actual if networks_unchanged else None)
            if result.outcomes
            else result.actual
        )
        self._processes = dict(actual.processes)
        mine = [c for c in actual.containers.values() if c.labels.get(NODE) == self.node]
        self._counts = {
            "containers": len(mine),
            "containers_running": sum(c.state == "running" for c in mine),
            "networks": sum(n.labels.get(NODE) == self.node for n in actual.networks.values()),
            "processes": len(actual.processes),
            "processes_running": sum(p.state == "running" for p in actual.processes.values()),
        }
        # a process kept from running by a full state disk: the node is not where it should be
        unsaved = self.supervisor.record_errors()
        self.metrics.unsaved.set(len(unsaved))
        converged = result.converged and desired.is_complete and not unsaved
        self._last = (result, converged)
        if converged and desired.manifest is not None:
            self.applied = (desired.manifest.generation, desired.manifest.commit)
            self.store.applied(desired.manifest.generation)
        item_errors = dict(result.plan.refused) | {
            o.action.target: o.error for o in result.outcomes if o.error
        }
        self.reporter.note_started(started_containers(result.outcomes, result.actual))  # last_exit
        if offline is not None:  # no broker to report to: the first pass after it answers does
            if not result.plan.actions:
                return
            log.info(
                "node %s: pass %d on the saved state ran %d actions, %d failed%s",
                self.node,
                self.passes,
                len(result.outcomes),
                sum(not o.ok for o in result.outcomes),
                "; converged" if converged else "",
            )
            return
        self.reporter.refresh([*stopped, *(o.action.ref for o in result.outcomes if o.action.ref)])
        try:
            # a container handed over to its process is no item to report as missing
            self.reporter.report_items(wanted(desired, actual), actual, item_errors)
            for note in self.reporter.skipped:  # the plan's errors already name these objects
                log.debug("node %s: %s", self.node, note)
            errors = [*result.errors, *restart_errors, *unsaved]
            errors += sorted(self.store.errors().values())
            self.reporter.report_status("online", applied=self.applied, converged=converged, errors=errors)
        except MqttError as e:
            log.warning("node %s: cannot publish actual state: %s", self.node, e)
        if converged and desired.manifest is not None:
            # the broker's view, complete and applied: what a start without it uses. Saved
            # after the reports: its fsync need not delay the status a push waits for
            self._save(desired)
        if result.plan.actions:
            log.info(
                "node %s: pass %d ran %d actions, %d failed",
                self.node,
                self.passes,
                len(result.outcomes),
                sum(not o.ok for o in result.outcomes),
            )

    def _read_desired_back(self) -> None:
        """Read the node's desired topics retained on the broker into the store (beside the
        subscription, which a broker node can leave quiet; see desired_reread.py). Only what
        is there is applied: a topic missing from a read is no clear (a partial replay)."""
        # not the subscription's own filter: reading that re-subscribes it at QoS 1 (a SUBSCRIBE
        # replaces the QoS of its filter), on NATS a JetStream consumer whose creation an
        # election times out; ``<node>/+/#`` matches the same topics (``#`` matches the level
        # above it too) and is read at QoS 0
        subtree = self.topics.desired_node_filter(self.node).removesuffix("#") + "+/#"
        try:
            # 10 s: a NATS node answers a subscription only once its retained replay loaded,
            # which waits 5 s for JetStream while the stream elects a leader
            held = self.desired_client.collect_retained(subtree, timeout=10)
        except MqttError as e:
            log.info("node %s: cannot read its desired topics back: %s", self.node, e)
        else:
            before = self.store.snapshot()
            self.store.apply_all(held, retained=True)
            if self.store.snapshot() != before:
                log.warning(
                    "node %s: reading its desired topics back found what the subscription had not "
                    "delivered (a broker node that stopped delivering or serves an older set)",
                    self.node,
                )
        self.reread.read(waiting=self.store.is_waiting())

    def _save(self, desired: DesiredState) -> None:
        try:
            if self.saved.save(desired, saved_at=self._wall_clock()):
                log.debug("node %s: saved desired state %s", self.node, self.saved.path)
        except OSError as e:  # a full disk: the next start without a broker has an older view
            log.warning("node %s: cannot save the desired state to %s: %s", self.node, self.saved.path, e)

    def _heartbeat_loop(self) -> None:
        while not self.stop_event.is_set():
            self._heartbeat()
            self.stop_event.wait(self.settings.heartbeat_s)

    def _heartbeat(self) -> None:
        try:
            desired = self.store.snapshot()
            counts = {f"desired_{k}": len(desired.kind(k)) for k in ("containers", "networks", "processes")}
            counts |= self._counts | {"passes": self.passes}
            self.reporter.heartbeat(self.settings.heartbeat_s, counts)
        except Exception as e:  # never let the heartbeat thread die
            log.warning("node %s: heartbeat not sent: %s", self.node, e)

    def _shutdown(self) -> None:
        """Say offline, leave containers and processes running, disconnect."""
        self.stop()
        self.prefetcher.stop()  # a pull under way finishes in the daemon; nothing waits for it
        if self._heartbeats is not None:
            self._heartbeats.join(timeout=10)  # no heartbeat after the offline status
        events = self._events
        if events is not None and hasattr(events, "close"):
            with contextlib.suppress(Exception):  # already closed by a broken connection
                events.close()
        try:
            if self._connected:  # on the saved state, never connected: no one to tell
                payload = self.reporter.status_bytes("offline", reason="stopped")
                self.actual_client.publish_batch([(self.topics.status(self.node), payload)], timeout=5)
        except MqttError as e:
            log.warning("node %s: could not publish offline: %s", self.node, e)
        self.desired_client.stop()
        self.actual_client.stop()
        log.info("node agent for %s stopped; containers left running", self.node)

    def stop(self) -> None:
        """Ask the loop to end (signal-safe): waits inside a pass return early."""
        self.stop_event.set()
        self._start_settled.set()  # a start waiting for the broker's answer stops waiting
        self.docker.cancel()
        self.runner.queue.shutdown()
        if not self._connected:  # still waiting for the broker: end that wait
            self.actual_client.stop()
            self.desired_client.stop()
