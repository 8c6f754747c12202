"""Settings of the node agent, read once from ``PHRAME_*`` environment variables.

``phrame node-agent`` builds one :class:`AgentSettings` with :meth:`AgentSettings.from_env`
and hands it to the loop; nothing else in the package reads the environment.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from node_agent.errors import SettingsError

DEFAULT_STATE_DIR = "/var/lib/phrame"


def _number(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _secret(env: Mapping[str, str], name: str) -> str | None:
    """``NAME`` or the content of the file named by ``NAME_FILE`` (trailing newline dropped)."""
    path = env.get(name + "_FILE")
    if path:
        try:
            return Path(path).read_text("utf-8").rstrip("\n")
        except OSError as e:
            raise SettingsError(f"{name}_FILE={path!r} cannot be read: {e}") from None
    return env.get(name) or None


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
        env = os.environ if env is None else env
        return cls(
            node=env.get("PHRAME_NODE_NAME") or socket.gethostname().split(".")[0].lower(),
            heartbeat_s=_number(env, "PHRAME_HEARTBEAT_S", 5.0, minimum=0.1),
            resync_s=_number(env, "PHRAME_RESYNC_S", 30.0, minimum=0.1),
            parallelism=int(_number(env, "PHRAME_PARALLELISM", 4, minimum=1)),
            state_dir=Path(env.get("PHRAME_STATE_DIR") or DEFAULT_STATE_DIR),
            registry_username=env.get("PHRAME_REGISTRY_USERNAME") or None,
            registry_password=_secret(env, "PHRAME_REGISTRY_PASSWORD"),
            topic_prefix=env.get("PHRAME_TOPIC_PREFIX") or "phrame",
            debounce_s=_number(env, "PHRAME_DEBOUNCE_S", 0.2, minimum=0.0),
            stop_timeout_s=int(_number(env, "PHRAME_STOP_TIMEOUT_S", 10, minimum=0)),
            max_payload_bytes=int(_number(env, "PHRAME_MAX_PAYLOAD_BYTES", 1024 * 1024, minimum=1024)),
        )

    @property
    def registry_auth(self) -> dict[str, str] | None:
        """Pull credentials for docker-py, or None to use the node's own Docker config."""
        if self.registry_username and self.registry_password:
            return {"username": self.registry_username, "password": self.registry_password}
        return None
