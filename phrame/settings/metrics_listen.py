"""``PHRAME_METRICS_LISTEN``: the small Prometheus listener of the services without HTTP.

The node agent, placement and the mirrors read the setting with :func:`read_listen` and,
when it is set, serve their own registry with :func:`start_listener` (prometheus_client's
own threaded server, bound exactly where the setting says). Empty (the default) means no
listener at all: nothing is bound. It must never bind a wildcard address on its own.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from phrame.settings.env import EnvReader
from phrame.settings.errors import SettingsError
from phrame.settings.listen import Listen, parse_host_port

log = logging.getLogger(__name__)

__all__ = ["SETTING", "Listen", "parse_listen", "read_listen", "start_listener"]

SETTING = "PHRAME_METRICS_LISTEN"


def parse_listen(value: str | None, *, error: type[Exception] = SettingsError) -> Listen | None:
    """``host:port`` (``[::1]:9100`` for IPv6) or None when empty; a clear error otherwise."""
    if value is None or not value.strip():
        return None
    return parse_host_port(value, name=SETTING, example="127.0.0.1:9310 (empty: no listener)", error=error)


def read_listen(reader: EnvReader, *, error: type[Exception] | None = None) -> Listen | None:
    return parse_listen(reader.text(SETTING), error=error or reader.error)


def start_listener(registry: CollectorRegistry, listen: Listen | None) -> Any:
    """Serve ``registry`` on ``listen`` (GET /metrics, any path) on a daemon thread; returns
    the server (``shutdown()`` ends it) or None when ``listen`` is None."""
    if listen is None:
        return None
    server, _thread = start_http_server(listen.port, addr=listen.host, registry=registry)
    log.info("metrics on http://%s/metrics", listen)
    return server
