"""The MQTT connection settings every service shares, read from ``PHRAME_*`` variables.

Services call :meth:`MqttSettings.from_env` once per plane; tests build the dataclass
directly. Secrets given as ``*_FILE`` are read here; a secret never appears in ``repr``.
Pure apart from reading those files; invalid settings raise :class:`SettingsError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phrame.mqtt.errors import SettingsError
from phrame.mqtt.urls import BrokerUrl, parse_urls
from phrame.settings import EnvReader

DEFAULT_URL = "mqtt://127.0.0.1:1883"
PROTOCOLS = ("5", "3.1.1", "auto")
PLANES = ("desired", "actual")


@dataclass(frozen=True)
class MqttSettings:
    """How to reach and authenticate to one broker (one plane)."""

    url: str = DEFAULT_URL
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    oauth2_token_url: str | None = None
    oauth2_client_id: str | None = None
    oauth2_client_secret: str | None = field(default=None, repr=False)
    oauth2_scope: str | None = None
    oauth2_retry_max_s: float = 30.0
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_verify_hostname: bool = True
    protocol: str = "5"
    keepalive_s: int = 30
    session_expiry_s: int = 300
    will_delay_s: int = 10
    reconnect_min_s: int = 1
    reconnect_max_s: int = 30
    no_connection_warn_s: float = 10.0  # a start without a deadline says why, once, after this

    def __post_init__(self) -> None:
        self.broker  # noqa: B018 -- parse now so a bad URL fails at start-up, not at connect
        if self.protocol not in PROTOCOLS:
            raise SettingsError(f"PHRAME_MQTT_PROTOCOL must be 5, 3.1.1 or auto, not {self.protocol!r}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SettingsError("PHRAME_TLS_CERT and PHRAME_TLS_KEY must be set together")
        if self.oauth2_token_url:
            if not self.oauth2_client_id or self.oauth2_client_secret is None:
                raise SettingsError(
                    "PHRAME_OAUTH2_TOKEN_URL needs PHRAME_OAUTH2_CLIENT_ID and "
                    "PHRAME_OAUTH2_CLIENT_SECRET (or _FILE)"
                )
            if self.password is not None:
                raise SettingsError("set either PHRAME_MQTT_PASSWORD or PHRAME_OAUTH2_TOKEN_URL, not both")
        if self.reconnect_min_s < 1 or self.reconnect_max_s < self.reconnect_min_s:
            raise SettingsError("reconnect delays must satisfy 1 <= min <= max")

    @property
    def brokers(self) -> tuple[BrokerUrl, ...]:
        """Every broker of the URL list (``url1,url2,...``: the nodes of one clustered broker),
        in the order the client tries them; they must share scheme and credentials."""
        return parse_urls(self.url)

    @property
    def broker(self) -> BrokerUrl:
        """The first broker of the list (the one a client tries first)."""
        return self.brokers[0]

    @property
    def negotiates(self) -> bool:
        """``auto``: MQTT 5 first, 3.1.1 from the first broker that refuses 5 on."""
        return self.protocol == "auto"

    @property
    def uses_oauth2(self) -> bool:
        return bool(self.oauth2_token_url)

    @property
    def mqtt_username(self) -> str | None:
        """The CONNECT user name: the setting, else the URL's, else the OAuth2 client id."""
        return self.username or self.broker.username or (self.oauth2_client_id if self.uses_oauth2 else None)

    def client_id(self, fallback: str) -> str:
        """The client id to connect with: the user name when there is one, else ``fallback``.

        The generated broker config (``use_username_as_clientid``) replaces every client id
        by the user name, so one account can never take over another's connection; using
        it here too keeps logs and sessions in agreement. Each service therefore opens one
        connection per broker. Without a user name (a local anonymous broker) ``fallback``.
        """
        return self.mqtt_username or fallback

    @property
    def static_password(self) -> str | None:
        return self.password if self.password is not None else self.broker.password

    @classmethod
    def from_env(cls, plane: str = "desired", env: Mapping[str, str] | None = None) -> MqttSettings:
        """Settings for ``plane`` (``desired`` or ``actual``) from ``env`` (default os.environ).

        One of ``PHRAME_DESIRED_MQTT_URL`` / ``PHRAME_ACTUAL_MQTT_URL`` set means both planes
        use that broker.
        """
        if plane not in PLANES:
            raise SettingsError(f"unknown plane {plane!r}; expected desired or actual")
        r = EnvReader(env, error=SettingsError)
        other = "actual" if plane == "desired" else "desired"
        url = (
            r.text(f"PHRAME_{plane.upper()}_MQTT_URL")
            or r.text(f"PHRAME_{other.upper()}_MQTT_URL")
            or DEFAULT_URL
        )
        return cls(
            url=url,
            username=r.text("PHRAME_MQTT_USERNAME"),
            password=r.secret("PHRAME_MQTT_PASSWORD"),
            oauth2_token_url=r.text("PHRAME_OAUTH2_TOKEN_URL"),
            oauth2_client_id=r.text("PHRAME_OAUTH2_CLIENT_ID"),
            oauth2_client_secret=r.secret("PHRAME_OAUTH2_CLIENT_SECRET"),
            oauth2_scope=r.text("PHRAME_OAUTH2_SCOPE"),
            oauth2_retry_max_s=r.number("PHRAME_OAUTH2_RETRY_MAX_S", 30.0),
            tls_ca=r.text("PHRAME_TLS_CA"),
            tls_cert=r.text("PHRAME_TLS_CERT"),
            tls_key=r.text("PHRAME_TLS_KEY"),
            tls_verify_hostname=r.flag("PHRAME_TLS_VERIFY_HOSTNAME", True),
            protocol=r.text("PHRAME_MQTT_PROTOCOL") or "5",
            keepalive_s=r.integer("PHRAME_MQTT_KEEPALIVE_S", 30),
            session_expiry_s=r.integer("PHRAME_MQTT_SESSION_EXPIRY_S", 300),
            will_delay_s=r.integer("PHRAME_MQTT_WILL_DELAY_S", 10),
            reconnect_max_s=r.integer("PHRAME_MQTT_RECONNECT_MAX_S", 30),
            no_connection_warn_s=r.number("PHRAME_MQTT_NO_CONNECTION_WARN_S", 10.0),
        )
