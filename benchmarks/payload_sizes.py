"""Measured MQTT payload sizes, for the fleet arithmetic of docs/performance.md ("What breaks first").

Desired plane: ``phrame render --format topics`` of the sample repo, each payload encoded as
config-sync publishes it (``canonical_json``). Actual plane: the node agent's own code
(``NodeReconciler`` on the real daemon, ``ActualReporter`` with a recording publisher)
reporting one real busybox container, its status and a heartbeat with this host's stats.
Then the per-heartbeat CPU of the code each heartbeat subscriber runs on it: placement's
handler (parse, JSON, schema check), config-sync's node watch and the mirror's JSON decode.
Prints one JSON object; the container carries a benchmark label and is removed at the end.
Exit 2 when no Docker daemon answers.
Baseline (same run): a bare ``json.loads`` of the same heartbeat, beside placement's
handler. Target: none; the sizes and costs are inputs to the fleet arithmetic of docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from statistics import mean
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from node_agent.docker_port import DockerPort  # noqa: E402
from node_agent.reconcile import NodeReconciler  # noqa: E402
from node_agent.reporting import ActualReporter  # noqa: E402
from phrame.actual import ActualView  # noqa: E402
from phrame.mqtt import Message  # noqa: E402
from schemas import Topics, canonical_json, check_payload, load_json  # noqa: E402
from tests.support import agent_support as spec  # noqa: E402
from tests.support import docker as docker_support  # noqa: E402

SAMPLE = ROOT / "fixtures" / "phrame-config"


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "heartbeat payload",
        "value": "actual.heartbeat_bytes",
        "unit": "B",
        "baseline": None,
        "target": None,
    },
    {
        "name": "desired item payload (mean)",
        "value": "desired.item_bytes_mean",
        "unit": "B",
        "baseline": None,
        "target": None,
    },
    {
        "name": "placement's handling of one heartbeat (bare json.loads as baseline)",
        "value": "heartbeat_cpu.placement_handler_us",
        "unit": "µs",
        "baseline": "heartbeat_cpu.mirror_json_decode_us",
        "target": None,
    },
]


class Recorder:
    def __init__(self) -> None:
        self.sent: dict[str, bytes] = {}

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        self.sent[topic] = payload or b""


def desired_sizes() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "phrame", "render", str(SAMPLE), "--format", "topics"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout  # fmt: skip
    topics = {t: len(canonical_json(p)) for t, p in json.loads(out).items()}
    items = [n for t, n in topics.items() if "/desired/nodes/" in t and not t.endswith("/manifest")]
    manifests = [n for t, n in topics.items() if t.endswith("/manifest")]
    nodes = len(manifests)
    return {
        "topics": len(topics),
        "nodes": nodes,
        "items": len(items),
        "item_bytes_mean": round(mean(items)),
        "item_bytes_max": max(items),
        "manifest_bytes_mean": round(mean(manifests)),
        "items_per_node_mean": round(len(items) / nodes, 2),
        "node_subtree_bytes_mean": round((sum(items) + sum(manifests)) / nodes),
        "other_desired_bytes": sum(n for t, n in topics.items() if "/desired/nodes/" not in t),
    }


def actual_sizes() -> dict[str, Any]:
    client = docker_support.try_docker_client()
    if client is None:
        print("payload_sizes: no Docker daemon answers", file=sys.stderr)
        raise SystemExit(2)
    label = f"bench-payload-{uuid.uuid4().hex[:8]}"
    image = docker_support.busybox_image(client)
    node, env = f"bench-{uuid.uuid4().hex[:6]}", f"b{uuid.uuid4().hex[:6]}"
    try:
        port = DockerPort(node, client=client, stop_timeout=1)
        item = spec.container(env, "mixer", image=image, command=["sleep", "3600"],
                              labels={docker_support.TEST_LABEL: label})  # fmt: skip
        desired = spec.desired([item], with_manifest=True)
        NodeReconciler(node, port).run_pass(desired)
        actual = NodeReconciler(node, port).observe()
        rec = Recorder()
        reporter = ActualReporter(rec, Topics(), node, inspect=port.inspect_container)
        reporter.report_items(desired, actual, {})
        reporter.report_status("online", applied=(12345, "f" * 40), converged=True)
        counts = {"desired_containers": 25, "desired_networks": 2, "desired_processes": 1, "passes": 123456,
                  "containers": 25, "containers_running": 25, "networks": 2, "processes": 1,
                  "processes_running": 1}  # fmt: skip
        reporter.heartbeat(5.0, counts)
        t = Topics()
        item = next(p for topic, p in rec.sent.items() if "/containers/" in topic)
        examples = {"heartbeat": rec.sent[t.heartbeat(node)], "status": rec.sent[t.status(node)]}
        examples["item"] = item
        return {
            **{f"{kind}_bytes": len(payload) for kind, payload in examples.items()},
            "heartbeat_topic_bytes": len(t.heartbeat(node)),
            "examples": examples,
        }
    finally:
        docker_support.cleanup(client, label)


def per_call_us(fn: Any, runs: int = 20000) -> float:
    start = time.process_time()
    for _ in range(runs):
        fn()
    return round((time.process_time() - start) / runs * 1e6, 1)


def heartbeat_handling(heartbeat: bytes) -> dict[str, float]:
    """CPU µs per heartbeat in each subscriber's handler (the paho receive path not included)."""
    topic = Topics().heartbeat("edge-0001")
    msg = Message(topic=topic, payload=heartbeat, retain=False)

    def placement() -> None:  # placement.loop.PlacementLoop.handle before the liveness update
        parsed = Topics().parse(msg.topic)
        check_payload(parsed.schema_name, load_json(msg.payload))

    view = ActualView(Topics(), timeout_s=20.0)  # placement's and config-sync's handler now
    return {
        "placement_handler_us": per_call_us(placement),
        "actual_view_us": per_call_us(lambda: view.on_message(msg)),
        "mirror_json_decode_us": per_call_us(lambda: json.loads(msg.payload)),
    }


def mirror_snapshot(examples: dict[str, bytes], nodes: int = 10000, items: int = 4) -> dict[str, float]:
    """The actual plane of ``nodes`` nodes (status, heartbeat, ``items`` items each, the
    payloads measured above) encoded as mirror.snapshot encodes it, once."""
    decoded = {k: json.loads(v) for k, v in examples.items()}
    topics: dict[str, Any] = {}
    for n in range(nodes):
        base = f"phrame/actual/nodes/edge-{n:06d}"
        topics[f"{base}/status"] = decoded["status"]
        topics[f"{base}/heartbeat"] = decoded["heartbeat"]
        for i in range(items):
            topics[f"{base}/containers/studio-a.svc{i}.0"] = decoded["item"]
    start = time.perf_counter()
    data = json.dumps({"topics": topics}, sort_keys=True, separators=(",", ":")).encode()
    return {"nodes": nodes, "items_per_node": items, "bytes": len(data),
            "encode_s": round(time.perf_counter() - start, 3)}  # fmt: skip


def main() -> int:
    actual = actual_sizes()
    examples = actual.pop("examples")
    doc = {"desired": desired_sizes(), "actual": actual,
           "heartbeat_cpu": heartbeat_handling(examples["heartbeat"]),
           "mirror_actual_snapshot": mirror_snapshot(examples)}  # fmt: skip
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
