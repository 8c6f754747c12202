"""Prometheus metrics of one topic API (its own registry, so tests can run many)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ApiMetrics:
    def __init__(self, *, streams: Callable[[], int] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.snapshot_reads = Counter(
            "phrame_topic_api_snapshot_reads",
            "Snapshot files read, by plane",
            ["plane"],
            registry=self.registry,
        )
        self.changes = Counter(
            "phrame_topic_api_changes", "Change events published to the streams", registry=self.registry
        )
        self.writes = Counter(
            "phrame_topic_api_writes",
            "Writes (kv, restart) by result (published, refused, unauthorized, unavailable)",
            ["result"],
            registry=self.registry,
        )
        self.refused_streams = Counter(
            "phrame_topic_api_streams_refused", "Event streams refused at the cap", registry=self.registry
        )
        self.streams = Gauge("phrame_topic_api_streams", "Open event streams", registry=self.registry)
        if streams is not None:
            self.streams.set_function(lambda: float(streams()))

    def render(self) -> bytes:
        return generate_latest(self.registry)
