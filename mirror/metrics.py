"""Prometheus metrics of one mirror, read from the loop's own counts at each scrape.

``phrame mirror`` serves :func:`mirror_registry` only when ``PHRAME_METRICS_LISTEN`` is set.
A scrape reads plain integers the loop keeps anyway (no lock, no work on the message path),
so the metrics can never slow or stop the mirror.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from mirror.loop import MirrorLoop


class MirrorCollector(Collector):
    def __init__(self, loop: MirrorLoop) -> None:
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        loop, writer, plane = self.loop, self.loop.writer, self.loop.settings.plane
        counters = (
            ("phrame_mirror_messages", "Messages received from the plane", loop.messages),
            ("phrame_mirror_snapshot_writes", "Snapshots written (atomically)", writer.writes),
            ("phrame_mirror_snapshot_failures", "Snapshot writes the disk refused", writer.failures),
        )
        for name, doc, value in counters:
            family = CounterMetricFamily(name, doc, labels=["plane"])
            family.add_metric([plane], value)
            yield family
        gauges = (
            ("phrame_mirror_snapshot_bytes", "Size of the last snapshot written", writer.last_bytes),
            ("phrame_mirror_topics", "Topics held in the last state", len(loop.topics_held())),
            (
                "phrame_mirror_snapshot_failing",
                "1 while the last write failed",
                int(writer.last_error is not None),
            ),
        )
        for name, doc, value in gauges:
            gauge = GaugeMetricFamily(name, doc, labels=["plane"])
            gauge.add_metric([plane], value)
            yield gauge


def mirror_registry(loop: MirrorLoop) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(MirrorCollector(loop))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
