"""Parsing broker URLs (``mqtt://``, ``mqtts://``, ``ws://``, ``wss://``) into connection facts.

Used by :mod:`phrame.mqtt.settings`; pure, no I/O. A URL it cannot use raises
:class:`SettingsError` naming the URL, never a bare ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from phrame.mqtt.errors import SettingsError

DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883, "ws": 80, "wss": 443}
DEFAULT_WS_PATH = "/mqtt"


@dataclass(frozen=True)
class BrokerUrl:
    """Where and how to reach one broker. ``path`` is only used over WebSocket."""

    scheme: str
    host: str
    port: int
    path: str = DEFAULT_WS_PATH
    username: str | None = None
    password: str | None = None

    @property
    def is_tls(self) -> bool:
        return self.scheme in ("mqtts", "wss")

    @property
    def is_websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def transport(self) -> str:
        """paho's transport name."""
        return "websockets" if self.is_websocket else "tcp"

    def redacted(self) -> str:
        """The URL without credentials, for logs and error messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        path = self.path if self.is_websocket else ""
        return f"{self.scheme}://{host}:{self.port}{path}"


def parse_url(url: str) -> BrokerUrl:
    """Parse a broker URL; the port defaults by scheme, the WebSocket path to ``/mqtt``."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as e:
        raise SettingsError(f"invalid broker URL {url!r}: {e}") from e
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise SettingsError(f"invalid broker URL {url!r}: scheme must be one of mqtt, mqtts, ws, wss")
    if not parts.hostname:
        raise SettingsError(f"invalid broker URL {url!r}: no host")
    if parts.query or parts.fragment:
        raise SettingsError(f"invalid broker URL {url!r}: query and fragment are not allowed")
    path = parts.path or DEFAULT_WS_PATH
    if scheme in ("mqtt", "mqtts") and parts.path not in ("", "/"):
        raise SettingsError(f"invalid broker URL {url!r}: a path is only allowed for ws:// and wss://")
    return BrokerUrl(
        scheme=scheme,
        host=parts.hostname,
        port=port or DEFAULT_PORTS[scheme],
        path=path,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )
