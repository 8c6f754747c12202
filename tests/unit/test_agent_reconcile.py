"""NodeReconciler.run_pass against a small fake at the ObservableRuntime seam (no Docker)."""

from __future__ import annotations

from typing import Any

from node_agent.errors import DockerError
from node_agent.models import ObservedContainer, ObservedNetwork
from node_agent.ports import ObservableRuntime
from node_agent.reconcile import NodeReconciler
from tests.support.agent_support import container, desired


class FakeRuntime:
    """Lists what it was given (or fails like an absent daemon) and records what it is told."""

    def __init__(self, containers: list[ObservedContainer] | None = None, *, absent: bool = False) -> None:
        self.containers = containers or []
        self.unavailable: str | None = "no Docker daemon answers (test)" if absent else None
        self.calls: list[tuple[str, str]] = []

    def list_containers(self) -> list[ObservedContainer]:
        if self.unavailable:
            raise DockerError(f"list containers: {self.unavailable}")
        return list(self.containers)

    def list_networks(self) -> list[ObservedNetwork]:
        if self.unavailable:
            raise DockerError(f"list networks: {self.unavailable}")
        return []

    def ensure_image(self, image: str, *, always: bool = False) -> None:
        self.calls.append(("pull", image))

    def create_container(self, spec: Any, *, name: str | None = None) -> str:
        self.calls.append(("create", name or spec["name"]))
        return "id-" + (name or spec["name"])

    def start(self, ref: str, *, name: str | None = None) -> None:
        self.calls.append(("start", name or ref))

    def remove_container(self, ref: str) -> None:
        self.calls.append(("remove", ref))

    def wait_ready(self, name: str, *, timeout: float = 120.0, poll: float = 0.2) -> None:
        self.calls.append(("ready", name))

    def create_network(self, spec: Any) -> None:
        self.calls.append(("network", spec["name"]))

    def remove_network(self, ref: str) -> None:
        self.calls.append(("rmnet", ref))


def test_a_pass_over_the_protocol_pulls_then_creates() -> None:
    runtime: ObservableRuntime = FakeRuntime()
    result = NodeReconciler("node-a", runtime).run_pass(
        desired([container("prod", "web", image="web:1")], with_manifest=True)
    )
    assert isinstance(runtime, FakeRuntime)
    assert runtime.calls == [("pull", "web:1"), ("create", "prod.web.0")]
    assert result.converged, result.to_dict()


def test_no_daemon_observes_nothing_and_removes_nothing() -> None:
    """A listing error while the runtime says it has no daemon is no failed pass: the
    plan sees no containers, so it can only create, never remove."""
    runtime = FakeRuntime(absent=True)
    result = NodeReconciler("node-a", runtime).run_pass(desired([], with_manifest=True))
    assert result.actual.containers == {} and result.plan.actions == ()
    assert runtime.calls == []
