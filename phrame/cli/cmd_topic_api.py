"""``phrame topic-api``: serve the topic API and the dashboard on ``PHRAME_LISTEN`` (default
127.0.0.1:8090) from the mirrors' snapshot files; writes go over one MQTT connection.

Runs until SIGTERM/SIGINT; open event streams end at once on the way out. Exit 2: bad settings.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

from phrame.mqtt import MqttError
from phrame.settings import setup_logging
from phrame.settings.http_serving import serve
from schemas import Topics
from topic_api.app import audit_topic, create_app
from topic_api.auth import RedactTokens
from topic_api.broker import Broker
from topic_api.errors import SettingsError
from topic_api.settings import ApiSettings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-broker", action="store_true", help="serve reads only (writes answer 503)")


def run(args: argparse.Namespace) -> int:
    setup_logging()
    try:
        settings = ApiSettings.from_env()
        # the kv space, and its own audit list (taken back after a restart)
        watched = (*settings.allowed_prefixes, audit_topic(settings.topic_prefix))
        replies = Topics(settings.topic_prefix).replies_filter()  # answers to log commands
        broker = None if args.no_broker else Broker(settings.mqtt, watched, replies=replies)
        servers: list[Any] = []  # uvicorn's, once built: its should_exit ends the event streams
        app = create_app(
            settings, broker=broker, should_stop=lambda: bool(servers and servers[0].should_exit)
        )
    except (SettingsError, MqttError) as e:
        print(f"phrame topic-api: {e}", file=sys.stderr)
        return 2
    if settings.token is None and settings.tokens_file is None:
        print(
            "phrame topic-api: no PHRAME_API_TOKEN nor PHRAME_TOKENS_FILE: writes are refused (401)",
            file=sys.stderr,
        )
    logging.getLogger("uvicorn.access").addFilter(RedactTokens())  # a token or ticket put in a URL
    host, port = settings.listen_address
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C after its graceful shutdown
        serve(app, host, port, settings.http, on_server=servers.append)
    return 0
