"""``phrame broker-config --inventory REPO --out DIR``: mosquitto.conf + ACL from the inventory
(``--format nats``: ``nats-auth.conf``, the same accounts and grants for a NATS cluster).

Writes ``DIR/mosquitto.conf`` and ``DIR/acl`` for the hub (the one broker, by default) or,
with ``--role site --site NAME``, for a site broker bridged to the hub. Passwords and
certificates are never generated here (create ``passwd`` with ``mosquitto_passwd``; the
bridge's own password is read from ``--hub-password-file``). Files in ``--out`` that it did
not write are kept unless ``--force``. Exit 0 written, 2 usage (unreadable inventory, bad
option, a file it would not overwrite).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from phrame.config_repo import ConfigError, load_directory
from phrame.mqtt.broker_config import BrokerOptions, acl_text, write_broker_config
from phrame.mqtt.broker_sites import (
    BridgeOptions,
    bridge_block,
    hub_bridge_acl,
    nodes_of_site,
    site_acl_text,
)
from phrame.mqtt.errors import SettingsError
from phrame.mqtt.nats_config import write_nats_config
from phrame.settings import EnvReader


def inventory_labels(repo: str | os.PathLike[str]) -> dict[str, dict[str, object]]:
    """Each node of the config repo at ``repo`` (``nodes/<node>.yaml``) with its labels."""
    if not (Path(repo) / "nodes").is_dir():
        raise SettingsError(f"{repo}: no nodes/ folder; is this a phrame-config repo?")
    try:
        loaded, _ = load_directory(repo)
    except ConfigError as e:
        raise SettingsError(f"cannot read the inventory in {repo}: {e}") from e
    out: dict[str, dict[str, object]] = {}
    for name, doc in loaded.nodes.items():
        labels = doc.data.get("labels") if isinstance(doc.data, dict) else None
        out[name] = dict(labels) if isinstance(labels, dict) else {}
    return out


def inventory_nodes(repo: str | os.PathLike[str]) -> list[str]:
    """Node names of the config repo at ``repo`` (``nodes/<node>.yaml``)."""
    return sorted(inventory_labels(repo))


def configure(parser: argparse.ArgumentParser) -> None:
    d = BrokerOptions()
    parser.add_argument("--inventory", required=True, metavar="REPO",
                        help="config repo directory holding nodes/<node>.yaml")  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="where to write the files")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files in DIR that broker-config did not write "
                             "(or that were edited since); by default they are kept")  # fmt: skip
    parser.add_argument("--format", choices=("mosquitto", "nats"), default="mosquitto",
                        help="mosquitto: mosquitto.conf and acl; nats: nats-auth.conf, the accounts and "
                             "grants in NATS's permission form (docs/operations/broker.md)")  # fmt: skip
    parser.add_argument("--prefix", default=EnvReader().topic_prefix(),
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
    bridged = parser.add_argument_group("bridged brokers (docs/operations/broker.md)")
    bridged.add_argument("--role", choices=("hub", "site"), default="hub",
                         help="hub: the broker of the services (default); site: a broker of "
                              "one site's agents, bridged to the hub")  # fmt: skip
    bridged.add_argument("--site", action="append", default=[], metavar="NAME",
                         help="site: the one site; hub: a site bridged in (repeat), which "
                              "gets an account bridge-NAME")  # fmt: skip
    bridged.add_argument("--site-label", default="site", metavar="KEY",
                         help="the node label naming a node's site (default: site)")  # fmt: skip
    bridged.add_argument("--hub-url", metavar="URL", help="site: the hub, mqtts://HOST:PORT")
    bridged.add_argument("--hub-password-file", metavar="FILE",
                         help="site: the password of bridge-NAME on the hub")  # fmt: skip
    bridged.add_argument("--hub-ca", metavar="FILE",
                         help="site: CA of the hub's certificate as the broker sees it "
                              "(default: TLS_DIR/ca.crt)")  # fmt: skip


def _site_files(args: argparse.Namespace, labels: dict[str, dict[str, object]],
                options: BrokerOptions) -> tuple[list[str], str, list[str]]:  # fmt: skip
    """Nodes, ACL text and bridge block of a site broker."""
    if len(args.site) != 1 or not args.hub_url or not args.hub_password_file:
        raise SettingsError("--role site needs one --site NAME, --hub-url and --hub-password-file")
    if not options.persistence_dir:
        raise SettingsError("--role site needs persistence (a --persistence-dir)")
    try:
        password = Path(args.hub_password_file).read_text().strip()
    except OSError as e:
        raise SettingsError(f"--hub-password-file: {e}") from e
    site = args.site[0]
    nodes = nodes_of_site(labels, site, args.site_label)
    bridge = BridgeOptions(site, args.hub_url, password, args.hub_ca)
    return nodes, site_acl_text(site, nodes, options.prefix), bridge_block(bridge, nodes, options)


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
        labels = inventory_labels(args.inventory)
        if args.format == "nats":
            if args.role == "site" or args.site:
                raise SettingsError("--format nats writes one cluster's accounts: no --role site or --site")
            written = write_nats_config(sorted(labels), args.out, prefix=options.prefix, force=args.force)
        elif args.role == "site":
            nodes, acl, block = _site_files(args, labels, options)
            written = write_broker_config(
                nodes, args.out, options, acl=acl, extra_conf=block, force=args.force
            )
        else:
            if args.hub_url or args.hub_password_file or args.hub_ca:
                raise SettingsError("--hub-url, --hub-password-file and --hub-ca are for --role site")
            sites = {s: nodes_of_site(labels, s, args.site_label) for s in args.site}
            acl = acl_text(sorted(labels), options.prefix) + hub_bridge_acl(sites, options.prefix)
            written = write_broker_config(sorted(labels), args.out, options, acl=acl, force=args.force)
    except (SettingsError, OSError) as e:
        print(f"phrame broker-config: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0
