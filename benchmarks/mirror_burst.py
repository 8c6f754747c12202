"""Benchmark: the mirror under a burst of 10,000 retained updates (run by ``make bench``;
prints one JSON object).

Measures snapshot writes against the naive one write per message, and the time from the
last update (its PUBACK at the publisher, and its arrival at the mirror) to the snapshot
that holds it. Target: under 2× the debounce window (250 ms). A real mosquitto that
queues the whole burst per client (see docs/services/mirror.md). Exit 0 when it ran, 2 without
mosquitto.
Baseline (same run): the naive one snapshot write per update (none for the latency: its
target is set by the debounce window). Targets: at most burst / debounce + 2 writes; last
arrival → snapshot under 2× the debounce window.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from phrame.mqtt import MqttClient, MqttSettings  # noqa: E402
from tests.support.mirror import mirror_settings, running_mirror  # noqa: E402
from tests.support.mosquitto import Mosquitto  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

UPDATES, TOPICS, DEBOUNCE_S = 10_000, 1_000, 0.25


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "snapshot writes for 10,000 updates (naive: one per update)",
        "value": "snapshot_writes",
        "unit": "",
        "baseline": "naive_writes",
        "target": "bound_writes",
    },
    {
        "name": "last arrival at the mirror → its snapshot",
        "value": "last_arrival_to_snapshot_ms",
        "unit": "ms",
        "baseline": None,  # the debounce window is a setting, not a measurement: it sets the target
        "target": "target_ms",
        "op": "<",
    },
]


def main() -> int:
    try:
        broker = Mosquitto(["max_queued_messages 20000"]).start()
    except BaseException as e:  # require_binary skips (pytest) when mosquitto is missing
        print(json.dumps({"benchmark": "mirror_burst", "error": f"no mosquitto: {e}"}))
        return 2
    publisher = MqttClient(MqttSettings(url=broker.url), "bench-publisher")
    try:
        publisher.start(timeout=5)
        with tempfile.TemporaryDirectory() as folder:
            settings = mirror_settings(broker.url, Path(folder), debounce_s=DEBOUNCE_S)
            with running_mirror(settings) as loop:
                started = time.monotonic()
                for batch in range(UPDATES // TOPICS):
                    items = [
                        (f"phrame/actual/nodes/n{i}/items/x", json.dumps({"v": batch * TOPICS + i}).encode())
                        for i in range(TOPICS)
                    ]
                    publisher.publish_batch(items)
                acked = time.monotonic()
                wait_for(lambda: any(held >= UPDATES for _, held in loop.written), "the final snapshot", 30)
                written_at = next(at for at, held in loop.written if held >= UPDATES)
                arrived = loop.last_message_at or acked
                writes = loop.writer.writes
        burst_s = acked - started
        result = {
            "benchmark": "mirror_burst",
            "updates": UPDATES,
            "topics": TOPICS,
            "debounce_ms": DEBOUNCE_S * 1000,
            "burst_s": round(burst_s, 3),
            "snapshot_writes": writes,
            "naive_writes": UPDATES,
            "write_ratio": round(writes / UPDATES, 5),
            "bound_writes": int(burst_s / DEBOUNCE_S + 2),
            "last_update_to_snapshot_ms": round((written_at - acked) * 1000, 1),
            "last_arrival_to_snapshot_ms": round((written_at - arrived) * 1000, 1),
            "target_ms": 2 * DEBOUNCE_S * 1000,
        }
    finally:
        publisher.stop()
        broker.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
