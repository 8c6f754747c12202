"""``phrame config-sync``: run the config-sync service (settings from ``PHRAME_*``).

Same as ``python -m config_sync``; ``--listen`` overrides ``PHRAME_LISTEN``. It refuses to
start without a webhook secret (unless explicitly insecure) and serves through
``phrame.settings.http_serving`` (header and body timeouts, a connection cap). With
``PHRAME_HA_LEASE_S`` it runs as active or standby (``config_sync.lease``) and exits 75 when
it loses the lease.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from collections.abc import Callable


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", help="host:port to serve on (default PHRAME_LISTEN or 127.0.0.1:8080)")


def run(args: argparse.Namespace, *, before_manifests: Callable[[], None] | None = None) -> int:
    """The command; ``before_manifests`` is the publisher's hook between a commit's items
    and its manifests (none but in a test's stand-in config-sync)."""
    from config_sync.app import create_app
    from config_sync.errors import SyncError
    from config_sync.service import ConfigSync
    from config_sync.settings import SyncSettings
    from phrame.settings import setup_logging
    from phrame.settings.http_serving import serve
    from phrame.settings.state import use_private_umask

    setup_logging()
    use_private_umask()  # the clone cache under PHRAME_STATE_DIR: 0600/0700 (git's files too)
    try:
        settings = SyncSettings.from_env()
        if args.listen:
            settings = dataclasses.replace(settings, listen=args.listen)
        settings.require_webhook_auth()
        service = ConfigSync(settings, before_manifests=before_manifests)
        service.on_lost = _end_on_lost
        app = create_app(service)
    except SyncError as e:
        print(f"phrame config-sync: {e}", file=sys.stderr)
        return 2
    host, port = settings.listen_address
    serve(app, host, port, settings.http, log_level="info")
    return LOST_LEASE if _lost else 0


LOST_LEASE = 75  # EX_TEMPFAIL: an active config-sync lost its lease; restarted, it stands by
_lost: list[str] = []


def _end_on_lost(why: str) -> None:
    """Active + standby: a config-sync that lost its lease ends (SIGTERM to itself: uvicorn
    stops serving and config-sync stops) with :data:`LOST_LEASE`; its supervisor restarts it
    as a standby. It already publishes nothing (the fence)."""
    _lost.append(why)
    os.kill(os.getpid(), signal.SIGTERM)
