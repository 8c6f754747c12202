"""Prometheus metrics of one config-sync instance (its own registry, so tests can run many)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


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
        self.ready = Gauge(
            "phrame_config_sync_ready", "1 when broker connected and repo fetched", registry=self.registry
        )
        if ready is not None:  # asked at each render: never stale, and asking changes nothing
            self.ready.set_function(lambda: 1.0 if ready() else 0.0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
