"""Settings of the node agent, read once from ``PHRAME_*`` environment variables.

``phrame node-agent`` builds one :class:`AgentSettings` with :meth:`AgentSettings.from_env`
and hands it to the loop; nothing else in the package reads the environment.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from node_agent.errors import SettingsError
from phrame_settings import EnvReader

DEFAULT_STATE_DIR = "/var/lib/phrame"


@dataclass(frozen=True)
class AgentSettings:
    node: str
    heartbeat_s: float = 5.0
    resync_s: float = 30.0
    parallelism: int = 4
    state_dir: Path = Path(DEFAULT_STATE_DIR)
    registry_username: str | None = None
    registry_password: str | None = None
    topic_prefix: str = "phrame"
    debounce_s: float = 0.2
    max_payload_bytes: int = 1024 * 1024
    stop_timeout_s: int = 10

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AgentSettings:
        r = EnvReader(env, error=SettingsError)
        return cls(
            node=r.text("PHRAME_NODE_NAME") or socket.gethostname().split(".")[0].lower(),
            heartbeat_s=r.number("PHRAME_HEARTBEAT_S", 5.0, minimum=0.1),
            resync_s=r.number("PHRAME_RESYNC_S", 30.0, minimum=0.1),
            parallelism=r.integer("PHRAME_PARALLELISM", 4, minimum=1),
            state_dir=r.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR),
            registry_username=r.text("PHRAME_REGISTRY_USERNAME"),
            registry_password=r.secret("PHRAME_REGISTRY_PASSWORD"),
            topic_prefix=r.text("PHRAME_TOPIC_PREFIX", "phrame") or "phrame",
            debounce_s=r.number("PHRAME_DEBOUNCE_S", 0.2),
            stop_timeout_s=r.integer("PHRAME_STOP_TIMEOUT_S", 10),
            max_payload_bytes=r.integer("PHRAME_MAX_PAYLOAD_BYTES", 1024 * 1024, minimum=1024),
        )

    @property
    def registry_auth(self) -> dict[str, str] | None:
        """Pull credentials for docker-py, or None to use the node's own Docker config."""
        if self.registry_username and self.registry_password:
            return {"username": self.registry_username, "password": self.registry_password}
        return None
