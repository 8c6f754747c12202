"""The placement service: liveness from the actual plane, passes on a work queue, state published.

``phrame placement`` builds one :class:`PlacementLoop` and runs it until SIGTERM. MQTT
messages only update liveness and add keys (:mod:`placement.triggers`): every environment when
a node's liveness changes, one when config-sync reports a new commit of it; a pending move
adds its environment for when it is due, and ``PHRAME_PLACEMENT_INTERVAL_S`` after the last
pass a resync adds every environment. A pass re-reads git and decides its environments. It
decides nothing while it does not hear the actual plane, and resumes liveness after a
(re)connect that may have missed heartbeats (not a token switch that kept the session), so
its own broker outage never reads as every node going offline. With
``PHRAME_LOCK_FILE`` set it decides only while holding the lock; a standby waits for the
lock before it connects (one broker connection per account) and takes over within seconds.
The loop logs and continues; it never dies.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from phrame.actual import ActualView
from phrame.gitlab import GitLabProject
from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings
from phrame.runtime import SIGNAL_CHECK_S, Clock, Runner
from placement.git_repo import PlacementRepo
from placement.health import PlacementHealth
from placement.listening import Listening
from placement.lock import ProcessLock
from placement.metrics import PlacementMetrics
from placement.reconcile import EnvResult, PlacementReconciler
from placement.settings import PlacementSettings
from placement.triggers import EVERY, Triggers
from schemas import PayloadError, Topics, check_payload

log = logging.getLogger(__name__)
MAX_CONFIRM_WAIT_S = 30.0  # a node beating slower than every 19 s is not waited for longer
MIN_MOVE_WAIT_S = 0.5  # a pending move due now is looked at again no sooner than this


class PlacementLoop:
    def __init__(
        self,
        reconciler: PlacementReconciler,
        liveness: PlacementHealth,
        *,
        actual: MqttClient,
        desired: MqttClient,
        topics: Topics,
        clock: Callable[[], float],
        interval_s: float,
        lock: ProcessLock | None = None,
        instance: str = "",
        timer: Clock = time.monotonic,
    ) -> None:
        self.reconciler = reconciler
        self.liveness = liveness
        self.actual = actual
        self.desired = desired
        self.topics = topics
        self.clock = clock
        self.interval_s = interval_s
        self.lock = lock
        self.instance = instance or reconciler.instance
        self._stop = threading.Event()
        self._connected = False
        self._published: dict[str, dict[str, Any]] = {}
        self._last_commit: dict[str, str] = {}
        self._gc_reported: set[str] = set()
        # one worker: passes never overlap (they share the clone and the published states)
        self.runner: Runner[str] = Runner(
            "placement", self.run_pass, clock=timer, resync_s=interval_s, resync=lambda: (EVERY,)
        )
        self.triggers = Triggers(liveness, topics, clock=clock, enqueue=self.runner.queue.add)
        self.listening = Listening(
            actual, liveness.view, clock=clock, where=actual.settings.broker.redacted()
        )
        self._held: dict[str, str | None] = {}
        self._desired_connects = -1
        self.metrics = PlacementMetrics(liveness, clock)

    # -- liveness input (runs on the MQTT network thread: quick, never raises)
    def handle(self, msg: Message) -> None:
        self.triggers.on_actual(msg)

    def connect(self, *, settle_s: float = 0.5, max_wait_s: float = 5.0, patient: bool = False) -> None:
        """Connect, follow heartbeats and statuses, and return once the retained ones are in.

        Not ``collect_retained``: with many nodes live heartbeats never leave a quiet gap.
        Retained copies arrive first and carry the retain flag; once none came for
        ``settle_s`` the first decision can trust what it knows (a node never heard from
        counts as offline, so deciding too early would leave new replicas unassigned).
        Then :meth:`confirm_stale` before the first decision.
        ``patient``: wait for a broker that is not up yet (until :meth:`stop`), as the loop does."""
        timeout = None if patient else 10.0
        self.actual.start(timeout=timeout)
        if self.desired is not self.actual:
            self.desired.start(timeout=timeout)
        self._connected = True
        self.listening.resume()  # before subscribing: waiting for the broker is no evidence
        start = time.monotonic()
        self.triggers.last_retained = start
        for topic_filter, qos in self.triggers.actual_filters():
            self.actual.subscribe(topic_filter, self.triggers.on_actual, qos=qos)
        self.desired.subscribe(self.triggers.sync_filter(), self.triggers.on_sync)
        while time.monotonic() - start < max_wait_s and not self._stop.is_set():
            if time.monotonic() - self.triggers.last_retained >= settle_s:
                break
            time.sleep(0.05)

    def confirm_stale(self) -> None:
        """Before the first decision, wait (a beat and a half at most) for a live heartbeat of
        each node whose retained one is dated past the timeout: dead, or alive with a clock
        behind ours. Deciding at once would take a live node for one not heard yet."""
        waiting = self.liveness.view.unconfirmed(self.clock())
        if not waiting:
            return
        wait_s = min(MAX_CONFIRM_WAIT_S, max(waiting.values()) - self.clock())
        log.info(
            "waiting up to %.1f s for a live heartbeat of %s: the retained one is dated past the "
            "node timeout (a node down, or its clock behind)",
            wait_s,
            ", ".join(sorted(waiting)),
        )
        give_up = time.monotonic() + wait_s  # real time: the decision clock may be a test's
        while self.liveness.view.unconfirmed(self.clock()) and time.monotonic() < give_up:
            if self._stop.wait(0.05):
                return

    # -- the loop
    def run(self) -> int:
        # The lock before the broker: a standby holds no connection, because the broker makes
        # the user name the client id and a second `placement` login would take the active
        # instance's place (it resumes liveness on connect like any fresh start).
        if self.lock is not None and not self.lock.acquire(self._stop):
            self.close()
            return 0
        try:
            self.connect(patient=True)
        except MqttError as e:
            self.close()
            if self._stop.is_set():
                log.info("placement stopped before it reached the broker")
                return 0
            log.error("cannot start placement: %s", e)
            return 1
        try:
            log.info(
                "placement %s is active (lock %s)", self.instance, self.lock.path if self.lock else "none"
            )
            self.confirm_stale()
            self.runner.queue.add(EVERY)
            self.runner.start()
            while not self._stop.wait(SIGNAL_CHECK_S):  # never blocked: SIGTERM's handler runs here
                pass
        finally:
            self.runner.stop()
            self.close()
        return 0

    def run_pass(self, key: str = EVERY) -> list[EnvResult]:
        """A pass over every environment (``key`` :data:`EVERY`) or one; the runner's sync.
        A pending move brings its environment back when the move is due."""
        started = time.monotonic()
        results = self._pass(key)
        self.metrics.record_pass(time.monotonic() - started, results)
        for result in results or []:
            pending = result.decision.pending if result.decision is not None else []
            if pending:
                wait = max(MIN_MOVE_WAIT_S, min(p.moves_in_s for p in pending))
                self.runner.queue.add(result.environment, wait)
        return results or []

    def _pass(self, key: str) -> list[EnvResult] | None:
        """One pass: None when it failed as a whole, [] when it does not hear the actual plane."""
        if self.desired.connect_count != self._desired_connects:
            self._desired_connects = self.desired.connect_count
            self._published.clear()  # a restarted broker may have lost the retained states
        if not self.listening.check():
            self._report_deaf()
            return []
        try:
            results = self.reconciler.run_pass(None if key == EVERY else (key,))
        except Exception:  # the loop never dies from one pass
            log.exception("placement pass failed")
            return None
        for result in results:
            self._publish(result)
        return results

    def stop(self) -> None:
        """Ask the loop to end (signal-safe)."""
        self._stop.set()
        self.runner.queue.shutdown()
        if not self._connected:  # still waiting for the broker: end that wait, off the signal frame
            threading.Thread(target=self.close, name="placement-stop", daemon=True).start()

    def close(self) -> None:
        for client in {id(c): c for c in (self.actual, self.desired)}.values():
            client.stop()
        if self.lock is not None:
            self.lock.release()

    # -- state output
    def state_of(self, result: EnvResult) -> dict[str, Any]:
        if result.commit:
            self._last_commit[result.environment] = result.commit
        for node in result.gc_candidates:
            if node not in self._gc_reported:
                log.warning("node %s has been offline for over the GC period: remove it from nodes/", node)
        self._gc_reported = set(result.gc_candidates)
        decision = result.decision
        held = decision.held if decision is not None else None
        if held and self._held.get(result.environment) != held:
            log.warning("environment %s: %s", result.environment, held)
        self._held[result.environment] = held
        doc: dict[str, Any] = {
            "environment": result.environment,
            "mode": result.mode,
            "track": result.track,
            "base": result.base,
            "last_commit": self._last_commit.get(result.environment),
            "branch": result.branch,
            "merge_request": result.merge_request,
            "gc_candidates": result.gc_candidates,
            "error": result.error,
            "held": held,
            "instance": self.instance,
        }
        if decision is not None:
            doc["assignments"] = decision.doc["assignments"]
            doc["unassigned"] = [u.to_dict() for u in decision.unassigned]
            doc["pending"] = [p.to_dict() for p in decision.pending]
            doc["moves"] = [m.describe() for m in decision.moves] if decision.is_changed else []
            doc["disconnect_grace_s"] = result.disconnect_grace_s
        return doc

    def _report_deaf(self) -> None:
        """Say so in every known environment's state, when the desired plane is reachable
        (a separate broker); with one broker for both planes the log says it."""
        if self.desired is self.actual or not self.desired.is_connected:
            return
        for environment, doc in sorted(self._published.items()):
            self._publish_doc(environment, doc | {"held": self.listening.reason})

    def _publish(self, result: EnvResult) -> None:
        self._publish_doc(result.environment, self.state_of(result))

    def _publish_doc(self, environment: str, doc: dict[str, Any]) -> None:
        last = self._published.get(environment)
        if last is not None and steady(last) == steady(doc):
            return  # unchanged: no retained republish every pass
        payload = doc | {"ts": self.clock()}
        topic = self.topics.env_placement(environment)
        try:
            check_payload("desired-placement", payload)
            # Waits for the PUBACK (briefly): a state that did not reach the broker is retried next pass.
            self.desired.publish_batch([(topic, json.dumps(payload).encode())], timeout=2.0)
        except (PayloadError, MqttError, ValueError) as e:
            log.error("cannot publish the placement state of %s on %s: %s", environment, topic, e)
            return
        self._published[environment] = doc


# Figures of a pending move that count time: they change every pass while nothing else
# does, so they alone never cause a publication (they hold as of the payload's ``ts``).
COUNTDOWN = ("offline_for_s", "moves_in_s")


def steady(doc: dict[str, Any]) -> dict[str, Any]:
    """The state without its countdowns: what decides whether it is published again."""
    if not doc.get("pending"):
        return doc
    pending = [{k: v for k, v in p.items() if k not in COUNTDOWN} for p in doc["pending"]]
    return doc | {"pending": pending}


def build_loop(settings: PlacementSettings, *, clock: Callable[[], float] = time.time) -> PlacementLoop:
    """Wire the real parts from settings (``phrame placement``)."""
    actual_settings = MqttSettings.from_env(plane="actual")
    desired_settings = MqttSettings.from_env(plane="desired")
    name = f"phrame-placement-{settings.instance.replace('/', '-')}"
    actual = MqttClient(actual_settings, f"{name}-actual")
    desired = (
        actual if desired_settings == actual_settings else MqttClient(desired_settings, f"{name}-desired")
    )
    topics = Topics(settings.topic_prefix)
    liveness = PlacementHealth(ActualView(topics, timeout_s=settings.node_timeout_s, clock=clock))
    merge_requests = None
    if settings.git_host == "gitlab" and settings.gitlab_url and settings.gitlab_project:
        project = GitLabProject(settings.gitlab_url, settings.gitlab_token, settings.gitlab_project)
        merge_requests = project.merge_requests
    reconciler = PlacementReconciler(
        PlacementRepo(
            settings.repo_url,
            settings.clone_cache,
            token=settings.git_token,
            ca_file=settings.git_ca_file,
            timeout_s=settings.git_timeout_s,
        ),
        liveness,
        clock=clock,
        reschedule_after_s=settings.reschedule_after_s,
        node_gc_s=settings.node_gc_s,
        default_ref=settings.default_ref,
        instance=settings.instance,
        merge_requests=merge_requests,
    )
    lock = ProcessLock(settings.lock_file, owner=settings.instance) if settings.lock_file else None
    return PlacementLoop(
        reconciler,
        liveness,
        actual=actual,
        desired=desired,
        topics=topics,
        clock=clock,
        interval_s=settings.interval_s,
        lock=lock,
        instance=settings.instance,
    )
