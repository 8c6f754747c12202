"""Settings of the node agent, read once from ``PHRAME_*`` environment variables.

``phrame node-agent`` builds one :class:`AgentSettings` with :meth:`AgentSettings.from_env`
and hands it to the loop; nothing else in the package reads the environment.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from node_agent.errors import SettingsError
from node_agent.policy import read_policy
from node_agent.secret_files import DEFAULT_SECRETS_DIR
from phrame.settings import EnvReader
from phrame.settings.metrics_listen import Listen, read_listen
from phrame.sops.keys import AgeKeyError, AgeKeys
from phrame.sops.keys import load as load_age_keys
from schemas.node_policy import NodePolicy

DEFAULT_STATE_DIR = "/var/lib/phrame"


@dataclass(frozen=True)
class AgentSettings:
    node: str
    heartbeat_s: float = 5.0
    resync_s: float = 30.0
    # read the node's desired topics back this often, beside the subscription (0: never);
    # sooner while a publication is incomplete (node_agent/desired_reread.py)
    desired_reread_s: float = 60.0
    parallelism: int = 4
    # image pulls at a time on this node (ahead of a wave and in a pass; node_agent/prefetch.py)
    pull_parallelism: int = 2
    # pull the images of a rollout's coming waves ahead (prefetch/<env>); off: this node
    # reports nothing of them and config-sync releases its waves without waiting (each
    # replace then includes its pull, as with an agent that predates pulling ahead)
    pull_ahead: bool = True
    state_dir: Path = Path(DEFAULT_STATE_DIR)
    registry_url: str | None = None  # host[:port] the credentials belong to
    registry_username: str | None = None
    registry_password: str | None = None
    topic_prefix: str = "phrame"
    debounce_s: float = 0.2
    # a desired state caught between an item and its manifest (config-sync publishes a node's
    # items, then its manifest) waits this long after the last message for the rest, so a
    # change makes one pass and one status, not a "not converged" one first
    manifest_wait_s: float = 2.0
    max_payload_bytes: int = 1024 * 1024
    stop_timeout_s: int = 10
    # several nodes' agents share this Docker daemon (the dev stack, tests): container names
    # carry the node (naming.py), so a replica moved off a dead node can start at once
    shared_daemon: bool = False
    # the only folder ``env: {X: {file: name}}`` values are read from (secret_files.py)
    secrets_dir: Path = DEFAULT_SECRETS_DIR
    # PHRAME_AGE_KEY_FILE's age identities (0600), which decrypt ``env: {X: {secret: file/key}}``
    # (sops_secrets.py); None: the setting is unset and such an item fails with that reason
    age_keys: AgeKeys | None = None
    metrics_listen: Listen | None = None  # PHRAME_METRICS_LISTEN host:port; None: no listener
    command_max_age_s: float = 60.0  # a restart command whose ts is further from now is dropped
    # what desired items may ask of this host (PHRAME_POLICY_FILE; node_agent/policy.py). The
    # default here is the policy of a node without a file; from_env always reads the file
    policy: NodePolicy = field(default_factory=NodePolicy)
    # at start, how long to wait for the broker before converging to the saved desired state
    # (node_agent/saved_state.py); 0: never start from it, wait for the broker as long as it takes
    offline_start_s: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AgentSettings:
        r = EnvReader(env, error=SettingsError)
        registry_url = registry_host(r.text("PHRAME_REGISTRY_URL"))
        username, password = r.text("PHRAME_REGISTRY_USERNAME"), r.secret("PHRAME_REGISTRY_PASSWORD")
        if (username or password) and not registry_url:
            raise SettingsError(
                "PHRAME_REGISTRY_USERNAME/PASSWORD are set but PHRAME_REGISTRY_URL is not: "
                "set it to the registry (host[:port]) the credentials are for"
            )
        state_dir = r.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR)
        secrets_dir = r.path("PHRAME_SECRETS_DIR", str(DEFAULT_SECRETS_DIR)) or DEFAULT_SECRETS_DIR
        return cls(
            node=r.text("PHRAME_NODE_NAME") or socket.gethostname().split(".")[0].lower(),
            heartbeat_s=r.number("PHRAME_HEARTBEAT_S", 5.0, minimum=0.1),
            resync_s=r.number("PHRAME_RESYNC_S", 30.0, minimum=0.1),
            desired_reread_s=r.number("PHRAME_DESIRED_REREAD_S", 60.0, minimum=0.0),
            parallelism=r.integer("PHRAME_PARALLELISM", 4, minimum=1),
            pull_parallelism=r.integer("PHRAME_PULL_PARALLELISM", 2, minimum=1),
            pull_ahead=r.flag("PHRAME_PULL_AHEAD", True),
            state_dir=state_dir,
            registry_url=registry_url,
            registry_username=username,
            registry_password=password,
            topic_prefix=r.topic_prefix(),
            debounce_s=r.number("PHRAME_DEBOUNCE_S", 0.2),
            manifest_wait_s=r.number("PHRAME_MANIFEST_WAIT_S", 2.0),
            stop_timeout_s=r.integer("PHRAME_STOP_TIMEOUT_S", 10),
            max_payload_bytes=r.integer("PHRAME_MAX_PAYLOAD_BYTES", 1024 * 1024, minimum=1024),
            shared_daemon=r.flag("PHRAME_SHARED_DAEMON", False),
            secrets_dir=secrets_dir,
            age_keys=_age_keys(r.path("PHRAME_AGE_KEY_FILE", None)),
            metrics_listen=read_listen(r, error=SettingsError),
            command_max_age_s=r.number("PHRAME_COMMAND_MAX_AGE_S", 60.0, minimum=1.0),
            policy=read_policy(r.path("PHRAME_POLICY_FILE", None), guarding=(state_dir, secrets_dir)),
            offline_start_s=r.number("PHRAME_OFFLINE_START_S", 5.0),
        )

    @property
    def registry_auth(self) -> dict[str, str] | None:
        """Pull credentials for docker-py (for ``registry_url`` only), or None to use the
        node's own Docker config."""
        if self.registry_username and self.registry_password:
            return {"username": self.registry_username, "password": self.registry_password}
        return None


def _age_keys(path: Path | None) -> AgeKeys | None:
    """The agent does not start with a key file it cannot use or that others may read."""
    if path is None:
        return None
    try:
        return load_age_keys(path)
    except AgeKeyError as e:
        raise SettingsError(str(e)) from None


_DOCKER_HUB = {"docker.io", "index.docker.io", "registry-1.docker.io"}


def registry_host(value: str | None) -> str | None:
    """``host[:port]`` of a registry, lower-cased; Docker Hub's aliases become ``docker.io``.

    A leading ``https://`` or ``http://`` and a trailing ``/`` are tolerated; a path is not.
    """
    if not value:
        return None
    host = value.strip().lower().removeprefix("https://").removeprefix("http://").rstrip("/")
    if not host or "/" in host or " " in host:
        raise SettingsError(
            f"PHRAME_REGISTRY_URL={value!r}: expected host[:port], e.g. registry.example.com:5000"
        )
    return "docker.io" if host in _DOCKER_HUB else host
