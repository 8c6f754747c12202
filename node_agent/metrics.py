"""Prometheus metrics of one node agent (its own registry, so tests can run many).

:class:`Agent` records each pass with :meth:`AgentMetrics.record_pass`; ``phrame node-agent``
serves the registry only when ``PHRAME_METRICS_LISTEN`` is set. Recording never raises into
the loop and never blocks a pass.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from node_agent.models import Op
from node_agent.reconcile import PassResult

# passes and pulls range from milliseconds (nothing to do) to minutes (a large image)
PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
PULL_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class AgentMetrics:
    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry()
        self.passes = Counter(
            "phrame_node_agent_passes",
            "Reconcile passes by result (converged, pending, failed)",
            ["result"],
            registry=self.registry,
        )
        self.pass_seconds = Histogram(
            "phrame_node_agent_pass_seconds",
            "Duration of a reconcile pass",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.actions = Counter(
            "phrame_node_agent_actions",
            "Actions run, by kind (op) and result (ok, error)",
            ["kind", "result"],
            registry=self.registry,
        )
        self.pull_seconds = Histogram(
            "phrame_node_agent_pull_seconds",
            "Duration of an image pull (ok or failed)",
            buckets=PULL_BUCKETS,
            registry=self.registry,
        )
        self.drift = Gauge(
            "phrame_node_agent_drift_items",
            "Items differing from desired after the last pass (failed or pending actions, refused items)",
            registry=self.registry,
        )
        self.converged = Gauge(
            "phrame_node_agent_converged",
            "1 when the last pass left the node converged",
            registry=self.registry,
        )
        self.unsaved = Gauge(
            "phrame_node_agent_processes_unsaved",
            "Host processes not running because the state folder cannot hold their record (a full disk)",
            registry=self.registry,
        )
        self.info = Gauge(
            "phrame_node_agent_info",
            "Always 1; the node label names the node",
            ["node"],
            registry=self.registry,
        )
        self.info.labels(node).set(1)

    def record_pass(self, seconds: float, result: PassResult | None, converged: bool, failed: bool) -> None:
        """One pass: ``result`` None when it failed before the reconciler returned one."""
        self.pass_seconds.observe(seconds)
        self.passes.labels("failed" if failed else "converged" if converged else "pending").inc()
        if result is None:
            return
        self.converged.set(1.0 if converged else 0.0)
        # what still differs after the pass: planned actions that did not succeed (failed or
        # not reached), changes left pending, items the planner refused
        succeeded = sum(o.ok for o in result.outcomes)
        self.drift.set(len(result.plan.actions) - succeeded + len(result.plan.pending) + len(result.errors))
        for outcome in result.outcomes:
            self.actions.labels(outcome.action.op.value, "ok" if outcome.ok else "error").inc()
            if outcome.action.op is Op.PULL_IMAGE:
                self.pull_seconds.observe(outcome.seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
