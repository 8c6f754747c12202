"""Benchmark: a change on the broker reaching a dashboard's event stream (run by ``make bench``;
prints one JSON object).

50 nodes × 40 container items retained on a real mosquitto (desired and actual, with
manifests, statuses and heartbeats: ~4,150 topics), ``phrame mirror`` for both planes with
their default debounce (250 ms) and ``phrame topic-api`` under uvicorn, as processes. For
each of 50 retained updates: the time from the publish to its ``change`` event on an SSE
client of ``/api/events`` (target: under 1 s), against the baseline measured in the same
run, the same publish's raw MQTT round trip to a subscriber. Also the time of the
``/api/nodes`` refetch a page makes after a change. Exit 0 when it ran, 2 without mosquitto.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from figures import percentile  # noqa: E402

from phrame.mqtt import Message, MqttClient, MqttSettings  # noqa: E402
from schemas import Topics  # noqa: E402
from tests.support.mosquitto import Mosquitto  # noqa: E402
from tests.support.topic_api import ApiStack, SseReader, fleet  # noqa: E402

NODES, ITEMS, CHANGES, TARGET_MS = 50, 40, 50, 1000.0


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "publish → SSE `change` event (p50; raw MQTT round trip as baseline)",
        "value": "sse_p50_ms",
        "unit": "ms",
        "baseline": "baseline_mqtt_p50_ms",
        "target": None,
    },
    {
        "name": "publish → SSE `change` event (p95)",
        "value": "sse_p95_ms",
        "unit": "ms",
        "baseline": "baseline_mqtt_p95_ms",
        "target": "target_ms",
        "op": "<",
    },
]


def pct(values: list[float], q: float) -> float:
    return round(percentile(values, q), 1)


def main() -> int:
    try:
        broker = Mosquitto(["max_queued_messages 20000"]).start()
    except BaseException as e:  # require_binary skips (pytest) when mosquitto is missing
        print(json.dumps({"benchmark": "sse_latency", "error": f"no mosquitto: {e}"}))
        return 2
    t = Topics()
    nodes = [f"bench-{i:02d}" for i in range(NODES)]
    publisher = MqttClient(MqttSettings(url=broker.url), "bench-publisher")
    subscriber = MqttClient(MqttSettings(url=broker.url), "bench-subscriber")
    heard: dict[str, float] = {}
    heard_cond = threading.Condition()

    def on_message(msg: Message) -> None:
        with heard_cond:
            heard[msg.topic + msg.payload.decode()] = time.monotonic()
            heard_cond.notify_all()

    with tempfile.TemporaryDirectory() as folder:
        # the mirrors' defaults: 250 ms debounce, 2 s max delay
        stack = ApiStack(
            broker.url, Path(folder), PHRAME_MIRROR_DEBOUNCE_MS="250", PHRAME_MIRROR_MAX_DELAY_MS="2000"
        )
        reader = None
        try:
            publisher.start(timeout=5)
            messages = fleet(nodes, ITEMS)
            publisher.publish_batch(messages.items(), timeout=60)
            stack.start()
            stack.wait_json(
                "/api/nodes",
                lambda d: len(d["nodes"]) == NODES and all(n["online"] for n in d["nodes"]),
                "every node online in the API",
                60,
            )
            subscriber.start(timeout=5)
            subscriber.subscribe(t.actual_filter(), on_message)
            reader = SseReader(stack.url + "/api/events")
            reader.next("hello")
            sse_ms, mqtt_ms, refetch_ms = [], [], []
            for i in range(CHANGES):
                node, item = nodes[i % NODES], f"demo.svc{i % ITEMS}.0"
                topic = t.actual_item(node, "containers", item)
                payload = json.dumps(
                    {"state": "running", "health": "healthy", "restart_count": i, "ts": time.time()}
                )
                sent = time.monotonic()
                publisher.publish(topic, payload.encode())
                _, arrived = reader.next("change", 10, lambda d, topic=topic: topic in d["changed"])
                with heard_cond:
                    heard_cond.wait_for(lambda topic=topic, payload=payload: topic + payload in heard, 5)
                    mqtt_at = heard[topic + payload]
                sse_ms.append((arrived - sent) * 1000)
                mqtt_ms.append((mqtt_at - sent) * 1000)
                started = time.monotonic()
                stack.json("/api/nodes")
                refetch_ms.append((time.monotonic() - started) * 1000)
            result = {
                "benchmark": "sse_latency",
                "nodes": NODES,
                "items_per_node": ITEMS,
                "retained_topics": len(messages),
                "changes": CHANGES,
                "mirror_debounce_ms": 250,
                "sse_p50_ms": pct(sse_ms, 0.5),
                "sse_p95_ms": pct(sse_ms, 0.95),
                "sse_max_ms": round(max(sse_ms), 1),
                "baseline_mqtt_p50_ms": pct(mqtt_ms, 0.5),
                "baseline_mqtt_p95_ms": pct(mqtt_ms, 0.95),
                "ratio_p50": round(statistics.median(sse_ms) / max(statistics.median(mqtt_ms), 0.001), 1),
                "api_nodes_refetch_p50_ms": pct(refetch_ms, 0.5),
                "target_ms": TARGET_MS,
                "met": pct(sse_ms, 0.95) < TARGET_MS,
            }
        finally:
            if reader is not None:
                reader.close()
            stack.stop()
            subscriber.stop()
            publisher.stop()
            broker.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
