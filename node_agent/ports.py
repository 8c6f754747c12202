"""The seams between the agent's decisions and Docker: what the executor and the reconciler
need from a container runtime, as Protocols.

:class:`node_agent.docker_port.DockerPort` satisfies both; a unit test hands in a small
fake. Only types here: no SDK import, no behaviour.
"""

from __future__ import annotations

from typing import Protocol

from node_agent.models import ObservedContainer, ObservedNetwork, Spec


class ContainerRuntime(Protocol):
    """What :class:`~node_agent.executor.Executor` does to containers and networks."""

    def ensure_image(self, image: str, *, always: bool = False) -> None: ...
    def create_container(self, spec: Spec, *, name: str | None = None) -> str: ...
    def start(self, ref: str, *, name: str | None = None) -> None: ...
    def remove_container(self, ref: str) -> None: ...
    def wait_ready(self, name: str, *, timeout: float = 120.0, poll: float = 0.2) -> None: ...
    def create_network(self, spec: Spec) -> None: ...
    def remove_network(self, ref: str) -> None: ...


class ObservableRuntime(ContainerRuntime, Protocol):
    """What :class:`~node_agent.reconcile.NodeReconciler` needs: the executor's calls, plus
    listing this daemon's managed objects and why Docker is unusable (None when it is)."""

    @property
    def unavailable(self) -> str | None: ...

    def list_containers(self) -> list[ObservedContainer]: ...
    def list_networks(self) -> list[ObservedNetwork]: ...
