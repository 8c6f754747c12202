"""One worker process of the LIGHT simulated fleet: thousands of nodes on one asyncio loop.

``fleet_scale.py`` starts a few of these past 1,000 nodes (``BENCH_FLEET_AGENTS=lite``),
where ``fleet_sim.py``'s real agents (a paho client and four threads each) no longer fit
the machine. Each simulated node behaves like ``phrame node-agent`` on the wire
(docs/architecture/topics.md), over its own MQTT 3.1.1 connection (``mqtt_lite.py``):
it connects with the agent's last will (``offline``, ``lost``), subscribes to its desired
subtree and its commands, keeps the items and manifest it receives, and makes a pass once
desired messages pause for the agent's debounce (0.2 s), or its manifest wait (2 s) while
the manifest and the items disagree; a pass "converges" at once (simulated Docker: what is
desired runs), reports each listed container's actual item and the status
(generation, commit, converged) when they differ from what it sent, and clears the reports
of containers no longer desired. A heartbeat every ``--heartbeat-s`` (5 s), its first at a
random phase. Not simulated: payload schema checks, the 30 s resync (a no-op pass sends
nothing), reading its own reports back after a reconnect (it never reconnects), commands
(received and ignored), networks and processes (received, counted for completeness,
not reported). Controlled over stdin as ``fleet_sim.py`` is (``stop NODE``; ``quit`` or
end of input) and answers on stdout (``connected N``, ``stopped NODE``, ``bye``).

Usage: ``python benchmarks/fleet_lite.py --broker mqtt://127.0.0.1:PORT NODE...``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import resource
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from mqtt_lite import Connection, Publish, Will  # noqa: E402

AGENT_VERSION = "0.1.0"  # node_agent.reporting.AGENT_VERSION (not imported: this process stays light)
PREFIX = "phrame"
DEBOUNCE_S, MANIFEST_WAIT_S, KEEPALIVE_S = 0.2, 2.0, 60
CONNECTING_AT_ONCE = 100
CONNECT_TIMEOUT_S = 300.0


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SimNode:
    """One simulated node's agent, on the wire."""

    def __init__(self, name: str, *, heartbeat_s: float) -> None:
        self.name = name
        self.heartbeat_s = heartbeat_s
        self.base = f"{PREFIX}/desired/nodes/{name}/"
        self.actual = f"{PREFIX}/actual/nodes/{name}/"
        will = dumps({"state": "offline", "agent": "node-agent", "reason": "lost"})
        self.will = Will(self.actual + "status", will)
        self.conn = Connection(f"phrame-agent-{name}", self.on_message)
        self.items: dict[str, dict[str, Any]] = {}  # "containers/<id>" -> desired doc
        self.manifest: dict[str, Any] | None = None
        self.running: dict[str, dict[str, Any]] = {}  # item id -> its actual item (simulated Docker)
        self.sent: dict[str, bytes] = {}  # topic -> payload last published
        self.last_message = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.passes = self.seq = 0
        self.applied: tuple[int, str] | None = None
        self.stopped = False

    # -- desired messages
    def on_message(self, msg: Publish) -> None:
        if not msg.topic.startswith(self.base):
            return  # a command: ignored
        key = msg.topic[len(self.base) :]
        doc = json.loads(msg.payload) if msg.payload else None
        if key == "manifest":
            self.manifest = doc
        elif key.startswith(("containers/", "networks/", "processes/")):
            if doc is None:
                self.items.pop(key, None)
            else:
                self.items[key] = doc
        else:
            return  # prefetch: no part of the desired state
        self.last_message = time.monotonic()
        self.wake()

    def wake(self, delay: float = DEBOUNCE_S) -> None:
        if self.timer is None and not self.stopped:
            self.timer = asyncio.get_running_loop().call_later(delay, self.check)

    def is_complete(self) -> bool:
        if self.manifest is None:
            return False
        return all((self.items.get(k) or {}).get("digest") == d for k, d in self.manifest["items"].items())

    def check(self) -> None:
        """The agent's ``_sync``: a pass once desired messages paused, longer while a change is half in."""
        self.timer = None
        quiet_at = self.last_message + DEBOUNCE_S
        now = time.monotonic()
        if now >= quiet_at and self.manifest is not None and not self.is_complete():
            quiet_at = max(quiet_at, self.last_message + MANIFEST_WAIT_S)
        if now < quiet_at:
            self.wake(quiet_at - now)
            return
        self.run_pass()

    def run_pass(self) -> None:
        self.passes += 1
        listed = None if self.manifest is None else self.manifest["items"]
        desired = {k: v for k, v in self.items.items() if listed is None or k in listed}
        containers = {k[len("containers/") :]: v for k, v in desired.items() if k.startswith("containers/")}
        for item_id, spec in containers.items():  # create or replace: it runs at once
            have = self.running.get(item_id)
            if have is None or have["digest"] != spec.get("digest"):
                self.running[item_id] = {
                    "state": "running", "health": None, "image": spec.get("image"),
                    "image_id": "sha256:" + hashlib.sha256(str(spec.get("image")).encode()).hexdigest(),
                    "digest": spec.get("digest"), "started_at": now_iso(), "restart_count": 0,
                    "exit_code": None, "error": None, "finished_at": None, "last_exit": None,
                    "agent_restarts": 0,
                }  # fmt: skip
        if listed is not None:  # without a manifest nothing is removed
            for item_id in [i for i in self.running if i not in containers]:
                del self.running[item_id]
        for item_id, report in self.running.items():
            self.send(f"{self.actual}containers/{item_id}", dumps(report))
        for topic in [t for t in self.sent if t.startswith(self.actual + "containers/")]:
            if topic[len(self.actual) + len("containers/") :] not in self.running:
                self.send(topic, b"")
        converged = self.is_complete()
        if converged and self.manifest is not None:
            self.applied = (int(self.manifest["generation"]), str(self.manifest["commit"]))
        status = {
            "state": "online", "agent": AGENT_VERSION,
            "generation": self.applied[0] if self.applied else None,
            "commit": self.applied[1] if self.applied else None,
            "converged": converged, "errors": [],
        }  # fmt: skip
        self.send(self.actual + "status", dumps(status))

    def send(self, topic: str, payload: bytes) -> None:
        if self.sent.get(topic, b"") == payload:
            return
        self.conn.publish(topic, payload, qos=1, retain=True)
        if payload:
            self.sent[topic] = payload
        else:
            self.sent.pop(topic, None)

    # -- heartbeats
    async def heartbeats(self) -> None:
        await asyncio.sleep(random.uniform(0, self.heartbeat_s))
        while not self.stopped and not self.conn.closed.is_set():
            counts = {
                "containers": len(self.running), "containers_running": len(self.running),
                "networks": 0, "processes": 0, "processes_running": 0, "passes": self.passes,
                "desired_containers": sum(k.startswith("containers/") for k in self.items),
                "desired_networks": 0, "desired_processes": 0,
            }  # fmt: skip
            doc = {
                "ts": time.time(), "seq": self.seq, "interval_s": self.heartbeat_s, "counts": counts,
                "host": {"cpu_percent": 3.0, "load1": 0.1, "mem_total": 34_359_738_368,
                         "mem_used": 4_294_967_296, "disk_total": 107_374_182_400,
                         "disk_used": 10_737_418_240},
            }  # fmt: skip
            self.seq += 1
            self.conn.publish(self.actual + "heartbeat", dumps(doc), qos=1, retain=True)
            await asyncio.sleep(self.heartbeat_s)

    async def start(self, host: str, port: int) -> None:
        await self.conn.connect(host, port, keepalive=KEEPALIVE_S, will=self.will)
        self.conn.subscribe(self.base + "#")
        self.conn.subscribe(f"{PREFIX}/cmd/nodes/{self.name}/#")
        self.last_message = time.monotonic()  # let the retained messages arrive first
        self.wake()

    async def stop(self) -> None:
        """As on SIGTERM: say offline (``stopped``), disconnect (the broker drops the will)."""
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
        self.conn.publish(self.actual + "status", dumps({"state": "offline", "agent": AGENT_VERSION,
                                                         "reason": "stopped"}))  # fmt: skip
        await self.conn.disconnect()


def say(line: str) -> None:
    print(line, flush=True)


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(nodes: list[SimNode], host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(CONNECTING_AT_ONCE)  # the broker's listen backlog

    async def start(node: SimNode) -> None:
        async with gate:
            await node.start(host, port)

    try:
        await asyncio.wait_for(asyncio.gather(*(start(n) for n in nodes)), CONNECT_TIMEOUT_S)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while sum(n.conn.subacks for n in nodes) < 2 * len(nodes) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # bounded: the SUBACKs, then the answer
        say(f"connected {len(nodes)}")
    except (OSError, TimeoutError) as e:
        say(f"error connecting: {e!r}")
    beats = [loop.create_task(n.heartbeats()) for n in nodes]
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, "quit")

    threading.Thread(target=read_stdin, daemon=True).start()
    by_name = {n.name: n for n in nodes}
    while True:
        command, _, name = (await lines.get()).strip().partition(" ")
        if command == "stop" and name in by_name:
            await by_name[name].stop()
            say(f"stopped {name}")
        elif command == "quit":
            break
    await asyncio.gather(*(n.stop() for n in nodes if not n.stopped), return_exceptions=True)
    for task in beats:
        task.cancel()
    say("bye")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--heartbeat-s", type=float, default=5.0)
    parser.add_argument("nodes", nargs="+")
    args = parser.parse_args(argv)
    raise_fd_limit()
    url = urlsplit(args.broker)
    nodes = [SimNode(n, heartbeat_s=args.heartbeat_s) for n in args.nodes]
    asyncio.run(serve(nodes, url.hostname or "127.0.0.1", url.port or 1883))
    return 0


if __name__ == "__main__":
    sys.exit(main())
