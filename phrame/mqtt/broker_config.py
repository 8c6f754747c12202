"""The broker's security as code: a mosquitto.conf and an ACL generated from the inventory.

``phrame broker-config`` (which reads the inventory) and the tests call
:func:`write_broker_config`. Each node agent ``node-<node>`` may read only its own desired
and command topics and write only its own actual topics; service accounts get one plane
each as the topic layout (docs/architecture/topics.md) says. Pure text
generation apart from writing the two files; no secrets here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from phrame.mqtt.errors import SettingsError
from phrame.mqtt.generated_files import check_replaceable, stamped

_NODE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")

# account -> (access, topic pattern) with {p} for the topic prefix.
SERVICE_ACCOUNTS: dict[str, tuple[tuple[str, str], ...]] = {
    # config-sync reads the desired plane back to find what is already published, and each
    # node's status to turn phrame/deploy green once the node converged, and heartbeat to
    # say which nodes a running deploy waits on are offline, and each container's report for
    # a staged rollout's health gate.
    "config-sync": (
        ("readwrite", "{p}/desired/#"),
        ("read", "{p}/actual/nodes/+/status"),
        ("read", "{p}/actual/nodes/+/heartbeat"),
        ("read", "{p}/actual/nodes/+/containers/+"),
    ),
    # active + standby (PHRAME_HA_LEASE_S): the second config-sync, with the same grants; it
    # needs an account of its own, since one account holds one connection
    "config-sync-standby": (
        ("readwrite", "{p}/desired/#"),
        ("read", "{p}/actual/nodes/+/status"),
        ("read", "{p}/actual/nodes/+/heartbeat"),
        ("read", "{p}/actual/nodes/+/containers/+"),
    ),
    "placement": (
        ("read", "{p}/desired/#"),
        ("read", "{p}/actual/#"),
        ("write", "{p}/desired/environments/+/placement"),
    ),
    "mirror-desired": (("read", "{p}/desired/#"),),
    "mirror-actual": (("read", "{p}/actual/#"),),
    # topic-api serves both planes, sends the command verbs (restart, logs: the agent answers
    # a logs command on its own actual/nodes/<node>/replies/<id>, read here) and keeps the
    # users' kv space (its default PHRAME_API_WRITE_PREFIXES; other prefixes need a grant here),
    # and its own audit list of the writes it took (config-sync's lies in its desired/#).
    # An ACL line cannot refuse the retain flag (mosquitto's acl_file checks topics only; a
    # plugin would be needed): the agents drop retained, old and repeated commands instead.
    "topic-api": (
        ("read", "{p}/desired/#"),
        ("read", "{p}/actual/#"),
        ("write", "{p}/cmd/nodes/+/containers/+/restart"),
        ("write", "{p}/cmd/nodes/+/containers/+/logs"),
        ("readwrite", "{p}/kv/#"),
        ("write", "{p}/desired/audit/topic-api"),
    ),
    # people and `phrame status`: read-only, so they need no service's account (a second
    # connection with a service's account would take that service's place, see below).
    "observer": (("read", "{p}/desired/#"), ("read", "{p}/actual/#")),
}

# Every listener replaces the client id by the user name: a client id is then bound to
# its account, so a stolen node password cannot take over (disconnect, and publish the
# will of) another node's agent or a service. mosquitto 2.0's ACL patterns (%c, %u) check
# topics only and clientid_prefixes is one global prefix; this is the option that ties
# ids to users. Its price: one connection per account per broker (services open one per
# broker; a second connection with the same account replaces the first).
CLIENT_ID_IS_USER = "use_username_as_clientid true"
STANDBY_ACCOUNT = "config-sync-standby"  # the second config-sync's (see SERVICE_ACCOUNTS)
MAX_QUEUED_MESSAGES = 100_000  # per client, QoS 1: a whole plane's burst fits
# QoS 1 messages unacknowledged at once, each way: mosquitto's default 20 is also the
# Receive Maximum it announces, which caps a client's batch (phrame.mqtt.paho_setup)
MAX_INFLIGHT_MESSAGES = 1000


@dataclass(frozen=True)
class BrokerOptions:
    """Where the generated mosquitto.conf puts listeners and finds its files."""

    prefix: str = "phrame"
    bind: str | None = None  # None: all interfaces
    mqtt_port: int = 8883  # MQTT over TLS
    ws_port: int = 8443  # MQTT over WebSocket over TLS
    plain_port: int | None = None  # optional plain MQTT, always on 127.0.0.1
    tls_dir: str = "/mosquitto/certs"  # ca.crt, server.crt, server.key as the broker sees them
    conf_dir: str = "/mosquitto/config"  # passwd and acl as the broker sees them
    persistence_dir: str | None = "/mosquitto/data/"
    require_certificate: bool = False


def node_account(node: str) -> str:
    return f"node-{node}"


def valid_prefix(prefix: str) -> str:
    if not _PREFIX.match(prefix):
        raise SettingsError(f"invalid topic prefix {prefix!r}")
    return prefix


def node_acl(node: str, prefix: str) -> list[str]:
    """One node agent's ``user`` block: its own desired, command and actual subtrees."""
    if not _NODE.match(node):
        raise SettingsError(f"invalid node name {node!r} in the inventory")
    return [
        f"user {node_account(node)}",
        f"topic read {prefix}/desired/nodes/{node}/#",
        f"topic read {prefix}/cmd/nodes/{node}/#",
        # readwrite: the agent reads its own earlier reports back to clear stale ones.
        f"topic readwrite {prefix}/actual/nodes/{node}/#",
    ]


def acl_text(nodes: list[str], prefix: str = "phrame") -> str:
    """The mosquitto ACL file: one ``user`` block per service account and per node."""
    valid_prefix(prefix)
    lines = [
        "# Generated by `phrame broker-config`; do not edit, regenerate from the inventory.",
        "# Anything not granted here is denied.",
    ]
    for account, grants in SERVICE_ACCOUNTS.items():
        lines += ["", f"user {account}"]
        lines += [f"topic {access} {pattern.format(p=prefix)}" for access, pattern in grants]
    for node in sorted(set(nodes)):
        lines += ["", *node_acl(node, prefix)]
    return "\n".join(lines) + "\n"


def mosquitto_conf(options: BrokerOptions) -> str:
    """mosquitto.conf: TLS listeners for MQTT and WebSocket, passwords and the ACL; on
    every listener the client id is the user name (:data:`CLIENT_ID_IS_USER`)."""
    o = options
    tls = [
        f"cafile {o.tls_dir}/ca.crt",
        f"certfile {o.tls_dir}/server.crt",
        f"keyfile {o.tls_dir}/server.key",
        "tls_version tlsv1.2",
        f"require_certificate {'true' if o.require_certificate else 'false'}",
    ]
    bind = f" {o.bind}" if o.bind else ""
    lines = [
        "# Generated by `phrame broker-config`; do not edit, regenerate from the inventory.",
        "per_listener_settings false",
        # PUBACKs go out at once: with Nagle on, every batch boundary stalls ~40 ms
        "set_tcp_nodelay true",
        # a mirror or config-sync reading a whole plane gets a burst of every node's items at
        # once; mosquitto's default of 1000 queued messages per client drops the rest
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",
        f"max_inflight_messages {MAX_INFLIGHT_MESSAGES}",
        "allow_anonymous false",
        f"password_file {o.conf_dir}/passwd",
        f"acl_file {o.conf_dir}/acl",
    ]
    if o.persistence_dir:
        lines += ["persistence true", f"persistence_location {o.persistence_dir}"]
    lines += ["", "# MQTT over TLS", f"listener {o.mqtt_port}{bind}", "protocol mqtt",
              *tls, CLIENT_ID_IS_USER]  # fmt: skip
    lines += ["", "# MQTT over WebSocket over TLS", f"listener {o.ws_port}{bind}",
              "protocol websockets", *tls, CLIENT_ID_IS_USER]  # fmt: skip
    if o.plain_port:
        lines += ["", "# plain MQTT for tools on the broker host only",
                  f"listener {o.plain_port} 127.0.0.1", "protocol mqtt", CLIENT_ID_IS_USER]  # fmt: skip
    return "\n".join(lines) + "\n"


def write_broker_config(
    nodes: list[str], out: str | os.PathLike[str], options: BrokerOptions, *, acl: str | None = None,
    extra_conf: list[str] | None = None, force: bool = False,
) -> list[Path]:  # fmt: skip
    """Write ``mosquitto.conf`` and ``acl`` for these inventory nodes into ``out``; ``acl``
    replaces the generated ACL text, ``extra_conf`` lines (a bridge) end the config, which
    is then private (0600): it holds the bridge's password. A file there that this function
    did not write (or that was edited since) is kept and :class:`SettingsError` raised,
    unless ``force``."""
    out_dir = Path(out)
    conf, acl_path = out_dir / "mosquitto.conf", out_dir / "acl"
    text = mosquitto_conf(options) + ("\n".join(extra_conf) + "\n" if extra_conf else "")
    acl = acl if acl is not None else acl_text(nodes, options.prefix)
    files = {conf: stamped(text), acl_path: stamped(acl)}
    check_replaceable(files, force=force)
    out_dir.mkdir(parents=True, exist_ok=True)
    if extra_conf:
        conf.touch(mode=0o600)
        conf.chmod(0o600)
    for path, content in files.items():
        path.write_text(content)
    return [conf, acl_path]
