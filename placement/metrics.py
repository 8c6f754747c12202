"""Prometheus metrics of one placement instance (its own registry, so tests can run many).

:class:`PlacementLoop` records each pass with :meth:`PlacementMetrics.record_pass`;
heartbeat ages and node liveness are read from :class:`PlacementHealth` at each scrape (never
stale, no work on the MQTT thread). ``phrame placement`` serves the registry only when
``PHRAME_METRICS_LISTEN`` is set. Recording never raises into the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from placement.health import PlacementHealth
    from placement.reconcile import EnvResult


class HeartbeatCollector(Collector):
    """Heartbeat age and liveness of every node placement has heard of, at scrape time."""

    def __init__(self, liveness: PlacementHealth, clock: Callable[[], float]) -> None:
        self.liveness, self.clock = liveness, clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        heard = {n: f.heard_at for n, f in self.liveness.view.nodes().items()}
        age = GaugeMetricFamily(
            "phrame_placement_heartbeat_age_seconds",
            "Seconds since the node's last heartbeat (on placement's clock)",
            labels=["node"],
        )
        alive = GaugeMetricFamily(
            "phrame_placement_node_alive", "1 when placement judges the node alive", labels=["node"]
        )
        health = self.liveness.health(heard, now)
        for node, at in sorted(heard.items()):
            if at is not None:
                age.add_metric([node], max(0.0, now - at))
            alive.add_metric([node], 1.0 if health[node].alive else 0.0)
        yield age
        yield alive


class PlacementMetrics:
    def __init__(self, liveness: PlacementHealth, clock: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self.passes = Counter(
            "phrame_placement_passes",
            "Placement passes by result (ok, error, deaf: the actual plane is not heard)",
            ["result"],
            registry=self.registry,
        )
        self.pass_seconds = Histogram(
            "phrame_placement_pass_seconds", "Duration of a placement pass", registry=self.registry
        )
        self.moves = Counter(
            "phrame_placement_moves",
            "Replica moves in decisions that changed node.json",
            ["environment"],
            registry=self.registry,
        )
        self.held = Counter(
            "phrame_placement_held_decisions",
            "Environment decisions held (nothing decided, the current node.json kept)",
            ["environment"],
            registry=self.registry,
        )
        self.errors = Counter(
            "phrame_placement_environment_errors",
            "Environment passes that failed",
            ["environment"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "phrame_placement_pending_moves",
            "Moves waiting for the reschedule delay, as of the last pass",
            ["environment"],
            registry=self.registry,
        )
        self.unassigned = Gauge(
            "phrame_placement_unassigned_replicas",
            "Replicas no node can take, as of the last pass",
            ["environment"],
            registry=self.registry,
        )
        self.registry.register(HeartbeatCollector(liveness, clock))

    def record_pass(self, seconds: float, results: list[EnvResult] | None) -> None:
        """One pass; ``results`` None when it failed as a whole, [] when deaf."""
        self.pass_seconds.observe(seconds)
        self.passes.labels("error" if results is None else "deaf" if not results else "ok").inc()
        for result in results or ():
            env, decision = result.environment, result.decision
            if result.error:
                self.errors.labels(env).inc()
            if decision is None:
                continue
            if decision.held:
                self.held.labels(env).inc()
            if decision.is_changed and not result.error:
                self.moves.labels(env).inc(len(decision.moves))
            self.pending.labels(env).set(len(decision.pending))
            self.unassigned.labels(env).set(len(decision.unassigned))

    def render(self) -> bytes:
        return generate_latest(self.registry)
