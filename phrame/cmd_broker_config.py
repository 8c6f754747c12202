"""``phrame broker-config --inventory REPO --out DIR``: mosquitto.conf + ACL from the inventory.

Writes ``DIR/mosquitto.conf`` and ``DIR/acl``; passwords and certificates are never
generated here (create ``passwd`` with ``mosquitto_passwd``). Exit 0 written, 2 usage
(unreadable inventory, bad option).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from config_repo import ConfigError, node_names
from phrame_mqtt.broker_config import BrokerOptions, write_broker_config
from phrame_mqtt.errors import SettingsError


def inventory_nodes(repo: str | os.PathLike[str]) -> list[str]:
    """Node names of the config repo at ``repo`` (``nodes/<node>.yaml``)."""
    if not (Path(repo) / "nodes").is_dir():
        raise SettingsError(f"{repo}: no nodes/ folder; is this a phrame-config repo?")
    try:
        return node_names(repo)
    except ConfigError as e:
        raise SettingsError(f"cannot read the inventory in {repo}: {e}") from e


def configure(parser: argparse.ArgumentParser) -> None:
    d = BrokerOptions()
    parser.add_argument("--inventory", required=True, metavar="REPO",
                        help="config repo directory holding nodes/<node>.yaml")  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="where to write the files")
    parser.add_argument("--prefix", default=os.environ.get("PHRAME_TOPIC_PREFIX", d.prefix),
                        help="topic prefix (default PHRAME_TOPIC_PREFIX or phrame)")  # fmt: skip
    parser.add_argument("--bind", default=d.bind, help="listener address (default: all)")
    parser.add_argument("--mqtt-port", type=int, default=d.mqtt_port, help="MQTT over TLS")
    parser.add_argument("--ws-port", type=int, default=d.ws_port, help="WebSocket over TLS")
    parser.add_argument("--plain-port", type=int, default=None,
                        help="also a plain MQTT listener on 127.0.0.1 (off by default)")  # fmt: skip
    parser.add_argument("--tls-dir", default=d.tls_dir,
                        help="ca.crt, server.crt, server.key as the broker sees them")  # fmt: skip
    parser.add_argument("--conf-dir", default=d.conf_dir,
                        help="passwd and acl as the broker sees them")  # fmt: skip
    parser.add_argument("--persistence-dir", default=d.persistence_dir,
                        help="retained-message store; '' turns persistence off")  # fmt: skip
    parser.add_argument("--require-certificate", action="store_true",
                        help="clients must present a certificate signed by ca.crt")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    options = BrokerOptions(
        prefix=args.prefix,
        bind=args.bind,
        mqtt_port=args.mqtt_port,
        ws_port=args.ws_port,
        plain_port=args.plain_port,
        tls_dir=args.tls_dir.rstrip("/") or "/",
        conf_dir=args.conf_dir.rstrip("/") or "/",
        persistence_dir=args.persistence_dir or None,
        require_certificate=args.require_certificate,
    )
    try:
        written = write_broker_config(inventory_nodes(args.inventory), args.out, options)
    except (SettingsError, OSError) as e:
        print(f"phrame broker-config: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0
