"""Docker networks for :class:`~node_agent.docker_port.DockerPort`: list, create, remove.

A mixin of the Docker adapter (it uses the port's retrying ``_call``), kept apart because
creating a network on a daemon that several nodes' agents share is a race (see
``networks.py``): it creates, then settles on the agreed winner. It removes only the
network id it is given, and never one with endpoints (Docker refuses; NetworkInUse).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import docker
from docker.types import IPAMConfig, IPAMPool

from node_agent.container_config import managed_labels
from node_agent.errors import DockerError, NetworkInUse, NotFound
from node_agent.models import MANAGED, NETWORK, NODE, ObservedNetwork, Spec
from node_agent.networks import split_duplicates

log = logging.getLogger(__name__)


class NetworkCalls:
    """The network calls of DockerPort (which provides these attributes)."""

    node: str
    api: docker.APIClient
    _cancelled: threading.Event
    _call: Callable[..., Any]

    def list_networks(self) -> list[ObservedNetwork]:
        """Every managed network on this daemon (any node: names may be shared): one API call."""
        rows = self._call("list networks", self.api.networks, filters={"label": [f"{MANAGED}=true"]})
        return [
            ObservedNetwork(r["Id"], r["Name"], r.get("Labels") or {}, r.get("Created") or "") for r in rows
        ]

    # -- networks
    def create_network(self, spec: Spec, *, settle_s: float = 5.0) -> None:
        """Create ``spec``'s network unless one of its name exists; on a race with another
        node's agent, keep the winner (``networks.split_duplicates``): remove ours at once
        if it lost, or wait (up to ``settle_s``) for the other creator to remove its own."""
        labels = managed_labels(spec, self.node)
        labels[NETWORK] = spec["network"]
        ipam = None
        if spec.get("subnet"):
            ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=spec["subnet"])])
        name = spec["name"]
        try:
            created = self._call(
                f"create network {name}",
                self.api.create_network,
                name,
                driver=spec.get("driver") or "bridge",
                internal=bool(spec.get("internal")),
                labels=labels,
                ipam=ipam,
                check_duplicate=True,  # narrows the race; the settling below closes it
            )
        except DockerError as e:
            if e.status == 409:  # another node's agent created it since this pass listed
                return
            raise
        now = time.monotonic()
        self._settle_network(name, str(created["Id"]), now + settle_s, now + 0.3)

    def _settle_network(self, name: str, ours: str, deadline: float, watch_until: float) -> None:
        """``watch_until``: a rival creation that began before ours was visible (so
        check_duplicate let it through) shows up within a few ms; watched for a while,
        and any later one is found by the next pass (``networks.network_actions``)."""
        while True:
            same = [n for n in self.list_networks() if n.name == name]
            winners, losers = split_duplicates(same)
            winner = winners.get(name)
            if winner is not None and winner.id != ours and any(n.id == ours for n in losers):
                log.info(
                    "network %s: another node created it first (%s); removing ours", name, winner.id[:12]
                )
                # in use: a container joined it meanwhile; the next plan moves that one first
                with contextlib.suppress(NetworkInUse):
                    self.remove_network(ours)
                return
            theirs = [n for n in losers if n.labels.get(NODE) != self.node]
            now = time.monotonic()
            if (not theirs and now > watch_until) or now > deadline:
                return  # alone, or left to the next pass (which names the holder)
            if self._cancelled.wait(0.05):  # the other creator removes its own at once
                return

    def remove_network(self, ref: str) -> None:
        """Remove by id (a name may be ambiguous); absent is fine; in use raises NetworkInUse."""
        try:
            self._call(f"remove network {ref}", self.api.remove_network, ref)
        except NotFound:
            return
        except DockerError as e:
            if "active endpoints" in str(e):
                raise NetworkInUse(str(e), status=e.status) from e
            raise
