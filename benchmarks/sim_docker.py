"""A SIMULATED Docker daemon, in memory, for ``benchmarks/fleet_scale.py`` only.

It satisfies :class:`node_agent.ports.AgentRuntime`, the seam where ``phrame node-agent``
hands its loop the real Docker adapter, so 1,000 simulated nodes can run the agent's real
MQTT side (desired store, manifest completeness, plan, item reports, status, heartbeat,
last will) on one machine. Nothing is run: a "container" is a row in a dict that is
running the moment it is created. It is no fake for correctness tests (those use the real
dockerd) and no product code: it lives beside the benchmark and nothing else imports it.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from node_agent.container_config import create_params, managed_labels
from node_agent.errors import NotFound
from node_agent.models import NETWORK, ObservedContainer, ObservedNetwork, Spec

_ids = itertools.count(1)


def _new_id() -> str:
    return f"{next(_ids):064x}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SimulatedDocker:
    """One node's simulated daemon. ``calls`` counts calls by name, as DockerPort does."""

    unavailable: str | None = None  # a simulated daemon always answers

    def __init__(self, node: str) -> None:
        self.node = node
        self._containers: dict[str, dict[str, Any]] = {}  # id -> row
        self._networks: dict[str, ObservedNetwork] = {}  # id -> network
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    # -- reading
    def list_containers(self) -> list[ObservedContainer]:
        with self._lock:
            self._count("containers")
            return [row["observed"] for row in self._containers.values()]

    def list_networks(self) -> list[ObservedNetwork]:
        with self._lock:
            self._count("networks")
            return list(self._networks.values())

    def logs_tail(self, ref: str, lines: int) -> bytes:
        with self._lock:
            self._count("logs")
            self._find(ref)
        return b""  # a simulated container prints nothing

    def inspect_container(self, name: str) -> dict[str, Any]:
        with self._lock:
            self._count("inspect_container")
            row = self._find(name)
            return {
                "State": dict(row["state"]),
                "RestartCount": 0,
                "Config": {"Labels": row["observed"].labels},
            }

    def _find(self, ref: str) -> dict[str, Any]:
        row = self._containers.get(ref)
        if row is None:
            row = next((r for r in self._containers.values() if r["observed"].name == ref), None)
        if row is None:
            raise NotFound(f"container {ref}: not found (simulated daemon)")
        return row

    # -- images: every image is present
    def ensure_image(self, image: str, *, always: bool = False) -> None:
        self._count("inspect_image")

    # -- containers
    def create_container(self, spec: Spec, *, name: str | None = None) -> str:
        params = create_params(spec, self.node, name=name)  # the agent's own labels and name
        cid = _new_id()
        observed = ObservedContainer(
            id=cid,
            name=params.name,
            state="running",
            labels=params.labels,
            image=params.image,
            image_id="sha256:" + hashlib.sha256(params.image.encode()).hexdigest(),
            networks={n: "" for n in params.networks},
        )
        state = {
            "Running": True,
            "Status": "running",
            "StartedAt": _now(),
            "FinishedAt": "0001-01-01T00:00:00Z",
        }
        with self._lock:
            self._count("create_container")
            if any(r["observed"].name == params.name for r in self._containers.values()):
                raise RuntimeError(f"simulated daemon: name {params.name} taken")
            self._containers[cid] = {"observed": observed, "state": state | {"ExitCode": 0}}
        return cid

    def start(self, ref: str, *, name: str | None = None) -> None:
        with self._lock:
            self._count("start")
            row = self._find(ref)
            row["state"].update(Running=True, Status="running", StartedAt=_now())
            o = row["observed"]
            row["observed"] = ObservedContainer(o.id, o.name, "running", o.labels, o.image, o.image_id)

    def restart(self, name: str) -> None:
        self.start(name)

    def remove_container(self, ref: str) -> None:
        with self._lock:
            self._count("remove_container")
            try:
                row = self._find(ref)
            except NotFound:
                return
            del self._containers[row["observed"].id]

    def wait_ready(self, name: str, *, timeout: float = 120.0, poll: float = 0.2) -> None:
        with self._lock:
            self._find(name)  # running from the moment it exists

    def settle(self, ids: Iterable[str], *, timeout: float = 2.0, poll: float = 0.02) -> None:
        return None  # the list is never behind: nothing to wait for

    # -- networks
    def create_network(self, spec: Spec) -> None:
        labels = managed_labels(spec, self.node)
        labels[NETWORK] = spec["network"]
        with self._lock:
            self._count("create_network")
            if not any(n.name == spec["name"] for n in self._networks.values()):
                nid = _new_id()
                self._networks[nid] = ObservedNetwork(nid, spec["name"], labels, _now())

    def remove_network(self, ref: str) -> None:
        with self._lock:
            self._count("remove_network")
            self._networks.pop(ref, None)

    # -- events and stopping
    def events(self) -> Iterator[dict[str, Any]]:
        """A stream that never has an event (nothing dies here) and ends at :meth:`cancel`."""
        self._closed.wait()
        yield from ()

    def cancel(self) -> None:
        self._closed.set()

    def running(self) -> int:
        with self._lock:
            return sum(r["state"]["Running"] for r in self._containers.values())
