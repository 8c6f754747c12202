"""Prometheus metrics of one config-sync instance (its own registry, so tests can run many)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from config_sync.deploys.records import DeployRecord
from config_sync.publication.sender import Verified

CONTENT_TYPE = CONTENT_TYPE_LATEST
# push -> converged: a second for a config change, minutes for large pulls, up to the timeout
DEPLOY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200)


class Metrics:
    def __init__(self, *, ready: Callable[[], bool] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.webhooks = Counter(
            "phrame_config_sync_webhooks",
            "Webhook deliveries by result (queued, ignored, duplicate, unauthorized, malformed, ...)",
            ["result"],
            registry=self.registry,
        )
        self.syncs = Counter(
            "phrame_config_sync_syncs",
            "Sync passes by ref and result",
            ["ref", "result"],
            registry=self.registry,
        )
        self.reviews = Counter(
            "phrame_config_sync_reviews",
            "Merge request reviews by result",
            ["result"],
            registry=self.registry,
        )
        self.sync_seconds = Histogram(
            "phrame_config_sync_sync_seconds", "Duration of a sync pass", ["ref"], registry=self.registry
        )
        self.messages = Counter(
            "phrame_config_sync_messages_published", "Retained messages published", registry=self.registry
        )
        self.anti_entropy_repaired = Counter(
            "phrame_config_sync_anti_entropy_repaired",
            "Retained desired topics the broker held otherwise than published, sent again",
            registry=self.registry,
        )
        self.anti_entropy_passes = Counter(
            "phrame_config_sync_anti_entropy_passes",
            "Read-backs of the desired plane that were compared with what was published",
            registry=self.registry,
        )
        self.sync_failing = Gauge(
            "phrame_config_sync_sync_failing",
            "1 while the last sync of the ref failed (error or invalid commit)",
            ["ref"],
            registry=self.registry,
        )
        self.deploys = Counter(
            "phrame_config_sync_deploys",
            "Deployments finished, by environment and result (converged, failed)",
            ["environment", "result"],
            registry=self.registry,
        )
        self.deploy_seconds = Histogram(
            "phrame_config_sync_deploy_seconds",
            "Publish of a commit to every node converged on it (or failed), per environment",
            ["environment", "result"],
            buckets=DEPLOY_BUCKETS,
            registry=self.registry,
        )
        self.notifications = Counter(
            "phrame_config_sync_notifications",
            "Deployment notifications by environment, notify: target and result"
            " (sent, retried, failed, dropped)",
            ["environment", "target", "result"],
            registry=self.registry,
        )
        self.ready = Gauge(
            "phrame_config_sync_ready", "1 when broker connected and repo fetched", registry=self.registry
        )
        if ready is not None:  # asked at each render: never stale, and asking changes nothing
            self.ready.set_function(lambda: 1.0 if ready() else 0.0)

    def watch_lease(self, active: Callable[[], bool], term: Callable[[], int]) -> None:
        """Active + standby (``PHRAME_HA_LEASE_S``): the role and the lease's term, asked at each scrape."""
        role = Gauge(
            "phrame_config_sync_active",
            "1 while this config-sync holds the lease (active), 0 while it stands by",
            registry=self.registry,
        )
        role.set_function(lambda: 1.0 if active() else 0.0)
        gauge = Gauge(
            "phrame_config_sync_lease_term",
            "The term of the lease this config-sync holds or last saw",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(term()))

    def record_sync(self, ref: str, result: str) -> None:
        """``result``: applied, invalid or error."""
        self.syncs.labels(ref, result).inc()
        self.sync_failing.labels(ref).set(0.0 if result == "applied" else 1.0)

    def deploy_finished(self, environment: str, record: DeployRecord) -> None:
        """A deployment record left pending (converged or failed; superseded ones never finish)."""
        self.deploys.labels(environment, record.state).inc()
        if record.duration_s is not None:
            self.deploy_seconds.labels(environment, record.state).observe(record.duration_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def anti_entropy_verified(self, result: Verified) -> None:
        self.anti_entropy_passes.inc()
        self.anti_entropy_repaired.inc(len(result.repaired))
