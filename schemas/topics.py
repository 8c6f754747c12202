"""The MQTT topic layout (docs/architecture/topics.md), built and parsed in this one place.

Every service builds topics with :class:`Topics` and parses incoming ones with
:meth:`Topics.parse`; nobody formats a topic string by hand. A topic that does not fit
the layout raises ``ValueError`` naming the topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ITEM_KINDS = ("containers", "networks", "processes")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_ITEM_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\.[a-z0-9][a-z0-9-]{0,62}(\.[0-9]+)?$")
_COMMAND_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
COMMANDS = ("restart", "logs")  # the verbs of phrame/cmd/nodes/<node>/containers/<id>/<verb>

# Which schema validates the payload of each topic kind.
SCHEMA_OF = {
    ("desired", "containers"): "desired-container",
    ("desired", "networks"): "desired-network",
    ("desired", "processes"): "desired-process",
    ("desired", "manifest"): "desired-manifest",
    ("desired", "prefetch"): "desired-prefetch",
    ("desired", "service"): "desired-service",
    ("desired", "sync"): "desired-sync",
    ("desired", "placement"): "desired-placement",
    ("desired", "deploys"): "desired-deploys",
    ("desired", "rollout"): "desired-rollout",
    ("desired", "preview"): "desired-preview",
    ("desired", "audit"): "desired-audit",
    ("desired", "lease"): "desired-lease",
    ("desired", "approvals"): "desired-approvals",
    ("desired", "reviews"): "desired-reviews",
    ("actual", "status"): "actual-status",
    ("actual", "heartbeat"): "actual-heartbeat",
    ("actual", "containers"): "actual-item",
    ("actual", "networks"): "actual-item",
    ("actual", "processes"): "actual-item",
    ("actual", "reply"): "actual-reply",
    ("cmd", "restart"): "cmd-restart",
    ("cmd", "logs"): "cmd-logs",
}


@dataclass(frozen=True)
class Topic:
    """A parsed topic. ``kind`` is an item kind, ``manifest``, ``prefetch``, ``status``, ``heartbeat``,
    ``service``, ``sync``, ``placement``, ``deploys``, ``approvals``, ``preview``, ``rollout``,
    ``audit``, ``lease``, ``reviews``, ``reply`` (an agent's answer to a command: never retained, no item) or
    a command verb (``restart``, ``logs``)."""

    plane: str  # desired | actual | cmd
    kind: str
    node: str | None = None
    environment: str | None = None
    item_id: str | None = None
    service: str | None = None

    @property
    def schema_name(self) -> str:
        return SCHEMA_OF[(self.plane, self.kind)]


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"invalid {what} {value!r} in topic")
    return value


@dataclass(frozen=True)
class Topics:
    """Topic builder and parser bound to one prefix (``PHRAME_TOPIC_PREFIX``)."""

    prefix: str = "phrame"

    def __post_init__(self) -> None:
        if not self.prefix or any(c in self.prefix for c in "#+") or self.prefix.endswith("/"):
            raise ValueError(f"invalid topic prefix {self.prefix!r}")

    # -- desired plane
    def desired_node(self, node: str) -> str:
        return f"{self.prefix}/desired/nodes/{_check(_NAME, node, 'node')}"

    def desired_item(self, node: str, kind: str, item_id: str) -> str:
        if kind not in ITEM_KINDS:
            raise ValueError(f"unknown item kind {kind!r}")
        return f"{self.desired_node(node)}/{kind}/{_check(_ITEM_ID, item_id, 'item id')}"

    def manifest(self, node: str) -> str:
        return f"{self.desired_node(node)}/manifest"

    def prefetch(self, node: str, env: str) -> str:
        """The images ``node`` pulls ahead of ``env``'s rollout waves (config-sync's ``rollouts``)."""
        return f"{self.desired_node(node)}/prefetch/{_check(_NAME, env, 'environment')}"

    def environment(self, env: str) -> str:
        return f"{self.prefix}/desired/environments/{_check(_NAME, env, 'environment')}"

    def env_service(self, env: str, service: str) -> str:
        return f"{self.environment(env)}/services/{_check(_NAME, service, 'service')}"

    def env_sync(self, env: str) -> str:
        return f"{self.environment(env)}/sync"

    def env_placement(self, env: str) -> str:
        return f"{self.environment(env)}/placement"

    def env_deploys(self, env: str) -> str:
        """The environment's last deployments (config-sync's ``deploy_records``)."""
        return f"{self.environment(env)}/deploys"

    def env_approvals(self, env: str) -> str:
        """The approvals of the environment's commits (config-sync's ``approvals``)."""
        return f"{self.environment(env)}/approvals"

    def env_preview(self, env: str) -> str:
        """A merge request's preview state (config-sync's ``previews``), ``env`` being ``<env>-mr-<iid>``."""
        return f"{self.environment(env)}/preview"

    def env_rollout(self, env: str, service: str) -> str:
        """A service's staged rollout (config-sync's ``rollouts``)."""
        return f"{self.environment(env)}/rollouts/{_check(_NAME, service, 'service')}"

    def reviews(self) -> str:
        """The plan digests config-sync reviewed, per merge request (config_sync.reviews)."""
        return f"{self.prefix}/desired/reviews"

    def lease(self, service: str) -> str:
        """The lease that lets one instance of ``service`` act (``config_sync.lease``)."""
        return f"{self.prefix}/desired/leases/{_check(_NAME, service, 'service')}"

    def audit(self, writer: str) -> str:
        """The audit list of HTTP writes one service took (``phrame.auth.audit``)."""
        return f"{self.prefix}/desired/audit/{_check(_NAME, writer, 'writer')}"

    # -- actual plane
    def actual_node(self, node: str) -> str:
        return f"{self.prefix}/actual/nodes/{_check(_NAME, node, 'node')}"

    def status(self, node: str) -> str:
        return f"{self.actual_node(node)}/status"

    def heartbeat(self, node: str) -> str:
        return f"{self.actual_node(node)}/heartbeat"

    def actual_item(self, node: str, kind: str, item_id: str) -> str:
        if kind not in ITEM_KINDS:
            raise ValueError(f"unknown item kind {kind!r}")
        return f"{self.actual_node(node)}/{kind}/{_check(_ITEM_ID, item_id, 'item id')}"

    def reply(self, node: str, command_id: str) -> str:
        """Where ``node``'s agent answers command ``command_id`` (not retained)."""
        return f"{self.actual_node(node)}/replies/{_check(_COMMAND_ID, command_id, 'command id')}"

    # -- commands
    def cmd_node(self, node: str) -> str:
        return f"{self.prefix}/cmd/nodes/{_check(_NAME, node, 'node')}"

    def restart(self, node: str, item_id: str) -> str:
        return f"{self.cmd_node(node)}/containers/{_check(_ITEM_ID, item_id, 'item id')}/restart"

    def logs(self, node: str, item_id: str) -> str:
        """A log tail command for ``node``'s container ``item_id`` (answered on :meth:`reply`)."""
        return f"{self.cmd_node(node)}/containers/{_check(_ITEM_ID, item_id, 'item id')}/logs"

    # -- subscription filters
    def desired_node_filter(self, node: str) -> str:
        return f"{self.desired_node(node)}/#"

    def desired_filter(self) -> str:
        return f"{self.prefix}/desired/#"

    def actual_filter(self, node: str | None = None) -> str:
        return f"{self.actual_node(node)}/#" if node else f"{self.prefix}/actual/#"

    def cmd_node_filter(self, node: str) -> str:
        return f"{self.cmd_node(node)}/#"

    def node_status_filter(self) -> str:
        """Every node's ``status`` (not the per-item topics)."""
        return f"{self.prefix}/actual/nodes/+/status"

    def actual_containers_filter(self) -> str:
        """Every node's observed containers (config-sync's rollouts watch their health)."""
        return f"{self.prefix}/actual/nodes/+/containers/+"

    def replies_filter(self) -> str:
        """Every node's command replies (the topic API waits on them)."""
        return f"{self.prefix}/actual/nodes/+/replies/+"

    def heartbeat_filter(self) -> str:
        return f"{self.prefix}/actual/nodes/+/heartbeat"

    def environments_filter(self) -> str:
        """Every environment's topics: declared services, ``sync``, ``placement``, ``deploys``."""
        return f"{self.prefix}/desired/environments/#"

    def is_reply(self, topic: str) -> bool:
        """Whether ``topic`` is an agent's answer to a command: never retained, so a mirror
        (which holds a plane's retained state) and the views leave it out."""
        if "/replies/" not in topic:
            return False
        try:
            return self.parse(topic).kind == "reply"
        except ValueError:
            return False

    def node_of(self, topic: str) -> str | None:
        """The node a topic of either plane is about (``None``: an environment's topic, or not
        one of this prefix's)."""
        try:
            return self.parse(topic).node
        except ValueError:
            return None

    def parse(self, topic: str) -> Topic:
        """Parse ``topic``; raise ``ValueError`` when it does not fit the layout."""
        head = self.prefix + "/"
        if not topic.startswith(head):
            raise ValueError(f"topic {topic!r} is outside prefix {self.prefix!r}")
        parts = topic[len(head) :].split("/")
        try:
            return _parse_parts(parts)
        except (ValueError, IndexError) as e:
            raise ValueError(f"topic {topic!r} does not fit the layout: {e}") from None


def _parse_parts(p: list[str]) -> Topic:
    plane = p[0]
    if plane in ("desired", "actual") and len(p) >= 3 and p[1] == "nodes":
        node = _check(_NAME, p[2], "node")
        if len(p) == 4 and p[3] in ("manifest", "status", "heartbeat"):
            valid = {"desired": ("manifest",), "actual": ("status", "heartbeat")}[plane]
            if p[3] in valid:
                return Topic(plane, p[3], node=node)
        if len(p) == 5 and p[3] in ITEM_KINDS:
            item = _check(_ITEM_ID, p[4], "item id")
            env, service = item.split(".")[:2]
            svc = service if p[3] != "networks" else None
            return Topic(plane, p[3], node=node, environment=env, item_id=item, service=svc)
        if plane == "desired" and len(p) == 5 and p[3] == "prefetch":
            return Topic(plane, "prefetch", node=node, environment=_check(_NAME, p[4], "environment"))
        if plane == "actual" and len(p) == 5 and p[3] == "replies":
            _check(_COMMAND_ID, p[4], "command id")
            return Topic(plane, "reply", node=node)
    if plane == "desired" and len(p) >= 4 and p[1] == "environments":
        env = _check(_NAME, p[2], "environment")
        if len(p) == 5 and p[3] == "services":
            return Topic(plane, "service", environment=env, service=_check(_NAME, p[4], "service"))
        if len(p) == 5 and p[3] == "rollouts":
            return Topic(plane, "rollout", environment=env, service=_check(_NAME, p[4], "service"))
        if len(p) == 4 and p[3] in ("sync", "placement", "deploys", "approvals", "preview"):
            return Topic(plane, p[3], environment=env)
    if plane == "desired" and len(p) == 2 and p[1] == "reviews":
        return Topic(plane, "reviews")
    if plane == "desired" and len(p) == 3 and p[1] == "leases":
        return Topic(plane, "lease", service=_check(_NAME, p[2], "service"))
    if plane == "desired" and len(p) == 3 and p[1] == "audit":
        _check(_NAME, p[2], "writer")
        return Topic(plane, "audit")
    if plane == "cmd" and len(p) == 6 and p[1] == "nodes" and p[3] == "containers":
        node = _check(_NAME, p[2], "node")
        item = _check(_ITEM_ID, p[4], "item id")
        if p[5] in COMMANDS:
            env, service = item.split(".")[:2]
            return Topic("cmd", p[5], node=node, environment=env, item_id=item, service=service)
    raise ValueError("unknown topic shape")
