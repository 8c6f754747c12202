"""``PHRAME_METRICS_LISTEN``: the small Prometheus listener of the services without HTTP.

The node agent, placement and the mirrors read the setting with :func:`read_listen` and,
when it is set, serve their own registry with :func:`start_listener` (prometheus_client's
own threaded server, bound exactly where the setting says). Empty (the default) means no
listener at all: nothing is bound. It must never bind a wildcard address on its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from phrame.settings.env import EnvReader

log = logging.getLogger(__name__)

SETTING = "PHRAME_METRICS_LISTEN"


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_listen(value: str | None, *, error: type[Exception] = ValueError) -> Listen | None:
    """``host:port`` (``[::1]:9100`` for IPv6) or None when empty; a clear error otherwise."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise error(f"{SETTING}={value!r}: expected host:port, e.g. 127.0.0.1:9310 (empty: no listener)")
    return Listen(host, int(port_text))


def read_listen(reader: EnvReader, *, error: type[Exception] = ValueError) -> Listen | None:
    return parse_listen(reader.text(SETTING), error=error)


def start_listener(registry: CollectorRegistry, listen: Listen | None) -> Any:
    """Serve ``registry`` on ``listen`` (GET /metrics, any path) on a daemon thread; returns
    the server (``shutdown()`` ends it) or None when ``listen`` is None."""
    if listen is None:
        return None
    server, _thread = start_http_server(listen.port, addr=listen.host, registry=registry)
    log.info("metrics on http://%s/metrics", listen)
    return server
