"""Settings of the topic API, read once from ``PHRAME_*`` environment variables.

``phrame topic-api`` builds one :class:`ApiSettings` with :meth:`from_env`; tests build the
dataclass directly. The snapshot folder follows the mirror's rule (``phrame.settings.
mirror_dir``); the token (``PHRAME_API_TOKEN`` / ``_FILE``) never appears in ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phrame.mqtt import MqttSettings
from phrame.settings import EnvReader, Listen, parse_host_port
from phrame.settings.http_serving import HttpLimits
from phrame.settings.mirror_dir import snapshot_dir
from schemas.container_exits import DEFAULT_WINDOW_S
from topic_api.errors import SettingsError
from topic_api.guard import host_names, is_valid_name
from topic_api.imports.settings import ImportSettings

DEFAULT_LISTEN = "127.0.0.1:8090"
MAX_BODY_BYTES = 256 * 1024  # one retained value; the desired container specs are a few KiB
HISTORY_S = 600.0  # heartbeats kept per node for the dashboard's charts
LOGS_TIMEOUT_S = 10.0  # how long a log tail request waits for the agent's reply
CONFIG_SYNC_TIMEOUT_S = 60.0  # a forwarded rollback fetches and pushes: git's time, not a read's


@dataclass(frozen=True)
class ApiSettings:
    mirror_dir: Path
    token: str | None = field(default=None, repr=False)
    tokens_file: Path | None = None  # named, scoped, hashed tokens (phrame.auth.tokens)
    read_token_required: bool = False  # reads need the token too (see docs/api.md)
    listen: str = DEFAULT_LISTEN
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides localhost and the listen host
    topic_prefix: str = "phrame"
    write_prefixes: tuple[str, ...] = ()  # empty: ``<prefix>/kv/`` only
    max_body_bytes: int = MAX_BODY_BYTES
    max_streams: int = 100  # concurrent /api/events streams
    max_streams_per_client: int = 10  # of them from one peer address
    poll_s: float = 0.1  # how often the snapshot files are stat'ed
    keepalive_s: float = 15.0
    node_timeout_s: float = 20.0  # as placement and config-sync: older heartbeat = offline
    history_s: float = HISTORY_S
    recent_exit_s: float = DEFAULT_WINDOW_S  # a container that died this recently is marked
    logs_timeout_s: float = LOGS_TIMEOUT_S  # PHRAME_API_LOGS_TIMEOUT_S: then 504
    http: HttpLimits = field(default_factory=HttpLimits)
    mqtt: MqttSettings = field(default_factory=MqttSettings)
    imports: ImportSettings = field(default_factory=ImportSettings)  # POST /api/import/compose
    config_sync_url: str | None = None  # PHRAME_CONFIG_SYNC_URL: where promote and rollback go
    config_sync_timeout_s: float = CONFIG_SYNC_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise SettingsError("PHRAME_API_TOKEN (or its _FILE) is empty; set a token or leave it unset")
        if self.read_token_required and self.token is None and self.tokens_file is None:
            raise SettingsError(
                "PHRAME_API_READ_TOKEN_REQUIRED=true needs PHRAME_API_TOKEN (or _FILE) or PHRAME_TOKENS_FILE"
            )
        url = self.config_sync_url
        if url is not None and not (url.startswith(("http://", "https://")) and len(url) > 8):
            raise SettingsError(f"PHRAME_CONFIG_SYNC_URL: {url!r} is not an http:// or https:// URL")
        for p in self.write_prefixes:
            if not p or any(c in p for c in "#+\x00"):
                raise SettingsError(f"PHRAME_API_WRITE_PREFIXES: {p!r} is not a topic prefix")
        self.listen_address  # noqa: B018 -- fail at start-up on a bad PHRAME_LISTEN
        for name in self.allowed_hosts:
            if not is_valid_name(name):
                raise SettingsError(
                    f"PHRAME_API_ALLOWED_HOSTS: {name!r} is not a host name (comma-separated names, or *)"
                )

    @property
    def host_names(self) -> frozenset[str]:
        """The ``Host`` names requests may carry (an IP address is always accepted)."""
        return host_names(listen_host=self.listen_address.host, extra=self.allowed_hosts)

    @property
    def allowed_prefixes(self) -> tuple[str, ...]:
        return self.write_prefixes or (f"{self.topic_prefix}/kv/",)

    @property
    def listen_address(self) -> Listen:
        return parse_host_port(self.listen, name="PHRAME_LISTEN", example=DEFAULT_LISTEN, error=SettingsError)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        e = EnvReader(env, error=SettingsError)
        directory, _ = snapshot_dir(e)
        prefixes = tuple(
            p.strip() for p in (e.text("PHRAME_API_WRITE_PREFIXES") or "").split(",") if p.strip()
        )
        hosts = tuple(h.strip() for h in (e.text("PHRAME_API_ALLOWED_HOSTS") or "").split(",") if h.strip())
        return cls(
            mirror_dir=directory,
            allowed_hosts=hosts,
            token=e.secret("PHRAME_API_TOKEN"),
            tokens_file=e.path("PHRAME_TOKENS_FILE"),
            read_token_required=e.flag("PHRAME_API_READ_TOKEN_REQUIRED", False),
            listen=e.text("PHRAME_LISTEN", DEFAULT_LISTEN) or DEFAULT_LISTEN,
            topic_prefix=e.topic_prefix(),
            write_prefixes=prefixes,
            max_body_bytes=e.integer("PHRAME_API_MAX_BODY_BYTES", MAX_BODY_BYTES, minimum=1024),
            max_streams=e.integer("PHRAME_API_MAX_STREAMS", 100, minimum=1),
            max_streams_per_client=e.integer("PHRAME_API_MAX_STREAMS_PER_CLIENT", 10, minimum=1),
            poll_s=e.integer("PHRAME_API_POLL_MS", 100, minimum=10) / 1000,
            node_timeout_s=e.number("PHRAME_NODE_TIMEOUT_S", 20.0, minimum=0.1),
            recent_exit_s=e.number("PHRAME_API_RECENT_EXIT_S", DEFAULT_WINDOW_S, minimum=0.0),
            logs_timeout_s=e.number("PHRAME_API_LOGS_TIMEOUT_S", LOGS_TIMEOUT_S, minimum=0.1),
            http=HttpLimits.from_env(e),
            mqtt=MqttSettings.from_env("desired", env),
            imports=ImportSettings.from_env(e),
            config_sync_url=e.text("PHRAME_CONFIG_SYNC_URL") or None,
            config_sync_timeout_s=e.number(
                "PHRAME_CONFIG_SYNC_TIMEOUT_S", CONFIG_SYNC_TIMEOUT_S, minimum=0.1
            ),
        )
