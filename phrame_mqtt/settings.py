"""The MQTT connection settings every service shares, read from ``PHRAME_*`` variables.

Services call :meth:`MqttSettings.from_env` once per plane; tests build the dataclass
directly. Secrets given as ``*_FILE`` are read here; a secret never appears in ``repr``.
Pure apart from reading those files; invalid settings raise :class:`SettingsError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phrame_mqtt.errors import SettingsError
from phrame_mqtt.urls import BrokerUrl, parse_url

DEFAULT_URL = "mqtt://127.0.0.1:1883"
PROTOCOLS = ("5", "3.1.1")
PLANES = ("desired", "actual")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


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

    def __post_init__(self) -> None:
        self.broker  # noqa: B018 -- parse now so a bad URL fails at start-up, not at connect
        if self.protocol not in PROTOCOLS:
            raise SettingsError(f"PHRAME_MQTT_PROTOCOL must be 5 or 3.1.1, not {self.protocol!r}")
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
    def broker(self) -> BrokerUrl:
        return parse_url(self.url)

    @property
    def uses_oauth2(self) -> bool:
        return bool(self.oauth2_token_url)

    @property
    def mqtt_username(self) -> str | None:
        """The CONNECT user name: the setting, else the URL's, else the OAuth2 client id."""
        return self.username or self.broker.username or (self.oauth2_client_id if self.uses_oauth2 else None)

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
        e = os.environ if env is None else env
        other = "actual" if plane == "desired" else "desired"
        url = (
            _get(e, f"PHRAME_{plane.upper()}_MQTT_URL")
            or _get(e, f"PHRAME_{other.upper()}_MQTT_URL")
            or DEFAULT_URL
        )
        return cls(
            url=url,
            username=_get(e, "PHRAME_MQTT_USERNAME"),
            password=_secret(e, "PHRAME_MQTT_PASSWORD"),
            oauth2_token_url=_get(e, "PHRAME_OAUTH2_TOKEN_URL"),
            oauth2_client_id=_get(e, "PHRAME_OAUTH2_CLIENT_ID"),
            oauth2_client_secret=_secret(e, "PHRAME_OAUTH2_CLIENT_SECRET"),
            oauth2_scope=_get(e, "PHRAME_OAUTH2_SCOPE"),
            oauth2_retry_max_s=_number(e, "PHRAME_OAUTH2_RETRY_MAX_S", 30.0),
            tls_ca=_get(e, "PHRAME_TLS_CA"),
            tls_cert=_get(e, "PHRAME_TLS_CERT"),
            tls_key=_get(e, "PHRAME_TLS_KEY"),
            tls_verify_hostname=_flag(e, "PHRAME_TLS_VERIFY_HOSTNAME", True),
            protocol=_get(e, "PHRAME_MQTT_PROTOCOL") or "5",
            keepalive_s=int(_number(e, "PHRAME_MQTT_KEEPALIVE_S", 30)),
            session_expiry_s=int(_number(e, "PHRAME_MQTT_SESSION_EXPIRY_S", 300)),
            will_delay_s=int(_number(e, "PHRAME_MQTT_WILL_DELAY_S", 10)),
            reconnect_max_s=int(_number(e, "PHRAME_MQTT_RECONNECT_MAX_S", 30)),
        )


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _secret(env: Mapping[str, str], name: str) -> str | None:
    """``NAME`` or the contents of the file named by ``NAME_FILE`` (one trailing newline cut)."""
    value, path = env.get(name), _get(env, f"{name}_FILE")
    if value and path:
        raise SettingsError(f"set either {name} or {name}_FILE, not both")
    if path is None:
        return value or None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SettingsError(f"{name}_FILE: cannot read {path}: {e.strerror}") from e
    return text.removesuffix("\n").removesuffix("\r")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = (_get(env, name) or "").lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false, not {value!r}")


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    value = _get(env, name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError as e:
        raise SettingsError(f"{name} must be a number, not {value!r}") from e
    if number < 0:
        raise SettingsError(f"{name} must not be negative")
    return number
