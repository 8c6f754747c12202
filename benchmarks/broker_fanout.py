"""mosquitto's CPU per message on this machine, for the fleet arithmetic of docs/performance.md.

One real mosquitto (plain, 127.0.0.1, as tests.support.mosquitto starts it) and our MQTT
client: ``BENCH_NODES`` heartbeat-sized retained QoS 1 messages (the measured 380 bytes of
benchmarks/payload_sizes.py) are published to as many topics while three subscribers take
the fan-out that heartbeats get in production (mirror-actual on ``actual/#``, config-sync
and placement on ``+/heartbeat``); then a fresh subscriber to ``actual/#`` takes the whole
retained snapshot (a mirror restarting). Run twice: plain MQTT, then MQTT over TLS as
``phrame broker-config`` listens (test certificates). The broker's own CPU time is read from
/proc, our clients' (paho and phrame.mqtt, callbacks that only count) from this process.
Prints one JSON object; reports, never gates.
Baseline (same run): the plain-MQTT run for the TLS run's broker CPU. Target: none; these
are inputs to the fleet arithmetic of docs/performance.md, not a budget.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from phrame.mqtt import MqttClient, MqttSettings  # noqa: E402
from schemas import Topics  # noqa: E402
from tests.support.certs import make_pki  # noqa: E402
from tests.support.mosquitto import Mosquitto  # noqa: E402
from tests.support.services import free_port  # noqa: E402

NODES = int(os.environ.get("BENCH_NODES", "20000"))
PAYLOAD = b"x" * 380  # the agent's heartbeat, measured by benchmarks/payload_sizes.py
T = Topics()


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "broker CPU per message in and out, TLS (plain MQTT as baseline)",
        "value": "tls.broker_cpu_us_per_message_in_and_out",
        "unit": "µs",
        "baseline": "plain.broker_cpu_us_per_message_in_and_out",
        "target": None,
    },
    {
        "name": "broker CPU per retained delivery, TLS (plain MQTT as baseline)",
        "value": "tls.broker_cpu_us_per_retained_delivery",
        "unit": "µs",
        "baseline": "plain.broker_cpu_us_per_retained_delivery",
        "target": None,
    },
]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Counter:
    def __init__(self) -> None:
        self.n = 0
        self.cond = threading.Condition()

    def __call__(self, _msg: Any) -> None:
        with self.cond:
            self.n += 1
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 300.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.n >= n, timeout):
                raise SystemExit(f"broker_fanout: {self.n} of {n} messages after {timeout} s")


def broker_and_settings(tls: bool) -> tuple[Mosquitto, MqttSettings]:
    limits = ["max_queued_messages 1000000", "max_inflight_messages 0"]
    if not tls:
        broker = Mosquitto(limits).start()
        return broker, MqttSettings(url=broker.url)
    folder = Path(tempfile.mkdtemp(prefix="phrame-bench-pki-"))
    folder.chmod(0o755)  # mosquitto reads the key after dropping to its own user
    pki = make_pki(("localhost", "127.0.0.1"), directory=folder)
    port = free_port()
    listener = [f"listener {port} 127.0.0.1", "allow_anonymous true", f"cafile {pki.ca}",
                f"certfile {pki.server_cert}", f"keyfile {pki.server_key}"]  # fmt: skip
    listener.append("tls_version tlsv1.2")  # as phrame broker-config writes it
    atexit.register(shutil.rmtree, folder, True)
    broker = Mosquitto(["per_listener_settings false", *listener, *limits], port=port, defaults=False).start()
    return broker, MqttSettings(url=f"mqtts://127.0.0.1:{port}", tls_ca=str(pki.ca))


def run(tls: bool) -> dict[str, Any]:
    broker, url = broker_and_settings(tls)
    assert broker.proc is not None
    clients: list[MqttClient] = []
    try:
        subs = {"mirror-actual": T.actual_filter(), "config-sync": T.heartbeat_filter(),
                "placement": T.heartbeat_filter()}  # fmt: skip
        counters = []
        for name, topic_filter in subs.items():
            c = MqttClient(url, f"bench-{name}")
            c.start(timeout=10)
            clients.append(c)
            counters.append(Counter())
            c.subscribe(topic_filter, counters[-1])
        pub = MqttClient(url, "bench-agents")
        pub.start(timeout=10)
        clients.append(pub)
        items = [(T.heartbeat(f"n{i:06d}"), PAYLOAD) for i in range(NODES)]
        cpu0, t0, own0 = cpu_s(broker.proc.pid), time.monotonic(), time.process_time()
        for i in range(0, NODES, 2000):
            pub.publish_batch(items[i : i + 2000], timeout=120)
        for counter in counters:
            counter.wait(NODES)
        fan_cpu, fan_wall = cpu_s(broker.proc.pid) - cpu0, time.monotonic() - t0
        own = time.process_time() - own0  # our clients: 1 publish + 3 receives per message
        snap = MqttClient(url, "bench-mirror-restart")
        snap.start(timeout=10)
        clients.append(snap)
        got = Counter()
        cpu0, t0 = cpu_s(broker.proc.pid), time.monotonic()
        snap.subscribe(T.actual_filter(), got)
        got.wait(NODES)
        snap_cpu, snap_wall = cpu_s(broker.proc.pid) - cpu0, time.monotonic() - t0
        deliveries = NODES * (1 + len(subs))  # each message in, plus one out per subscriber
        return {
            "tls": tls, "nodes": NODES, "payload_bytes": len(PAYLOAD), "subscribers": len(subs),
            "fanout_wall_s": round(fan_wall, 2), "fanout_broker_cpu_s": round(fan_cpu, 2),
            "broker_cpu_us_per_message_in_and_out": round(fan_cpu / deliveries * 1e6, 1),
            "client_cpu_us_per_message_sent_or_received": round(own / deliveries * 1e6, 1),
            "snapshot_wall_s": round(snap_wall, 2), "snapshot_broker_cpu_s": round(snap_cpu, 2),
            "broker_cpu_us_per_retained_delivery": round(snap_cpu / NODES * 1e6, 1),
            "load1_at_end": os.getloadavg()[0],
        }  # fmt: skip
    finally:
        for c in clients:
            c.stop()
        broker.stop()


def main() -> int:
    print(json.dumps({"plain": run(tls=False), "tls": run(tls=True)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
