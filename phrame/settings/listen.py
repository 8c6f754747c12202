"""``host:port`` settings: the one parser of every listen address (``PHRAME_LISTEN`` of
config-sync and the topic API, ``PHRAME_METRICS_LISTEN``, ``phrame dev --listen``).

Each settings class calls :func:`parse_host_port` with the setting's name and its own
:class:`~phrame.settings.errors.SettingsError` (sub)class. Pure: it never binds or resolves.
"""

from __future__ import annotations

from typing import NamedTuple

from phrame.settings.errors import SettingsError


class Listen(NamedTuple):
    """Where to listen; unpacks as ``host, port``. An IPv6 host is kept without brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_host_port(
    value: str,
    *,
    name: str,
    example: str = "127.0.0.1:8080",
    error: type[Exception] = SettingsError,
) -> Listen:
    """``host:port`` (``[::1]:9100`` for IPv6, port 1-65535); ``error`` names ``name`` otherwise."""
    host, sep, port = value.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise error(f"{name}={value!r}: expected host:port, e.g. {example}")
    return Listen(host, int(port))
