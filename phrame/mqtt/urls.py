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


def parse_urls(text: str) -> tuple[BrokerUrl, ...]:
    """A comma-separated list of broker URLs: the nodes of one broker cluster.

    Every entry must use the same scheme (one transport and one TLS set-up serve them all)
    and the same credentials (they are one account on one cluster); an entry twice is an
    error, since it would only lengthen a failover."""
    entries = [part.strip() for part in text.split(",")]
    if not any(entries):
        raise SettingsError("no broker URL given")
    if "" in entries:
        raise SettingsError(f"invalid broker URL list {_redacted_list(text)!r}: an empty entry")
    brokers = tuple(parse_url(entry) for entry in entries)
    first = brokers[0]
    for other in brokers[1:]:
        if other.scheme != first.scheme:
            raise SettingsError(
                f"broker URLs {first.redacted()} and {other.redacted()} differ in scheme: "
                "the nodes of one broker share one"
            )
        if (other.username, other.password) != (first.username, first.password):
            raise SettingsError(
                f"broker URLs {first.redacted()} and {other.redacted()} carry different credentials: "
                "the nodes of one broker share one account (or set PHRAME_MQTT_USERNAME/PASSWORD)"
            )
    seen: set[str] = set()
    for broker in brokers:
        if broker.redacted() in seen:
            raise SettingsError(f"broker URL {broker.redacted()} is listed twice")
        seen.add(broker.redacted())
    return brokers


def _redacted_list(text: str) -> str:
    """The list as a message may show it: each entry without its credentials where it parses."""
    shown = []
    for part in text.split(","):
        try:
            shown.append(parse_url(part).redacted() if part.strip() else "")
        except SettingsError:
            shown.append("<unreadable>")
    return ",".join(shown)
