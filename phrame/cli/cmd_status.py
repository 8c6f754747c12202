"""``phrame status [--json] [--timeout S] [--node NAME]``: the fleet as the broker knows it.

Reads the retained node ``status``/``heartbeat`` and container topics (a container that
exited within ``PHRAME_API_RECENT_EXIT_S`` and runs again is mentioned), each node's ``manifest`` and each
environment's ``sync``, ``placement`` and ``deploys`` topics (MQTT settings as every service:
``PHRAME_*``; with none, a dev stack's broker and read-only account from its ``stack.json``,
see :mod:`phrame.cli.dev_target`), then listens for live heartbeats (at most ``--timeout`` seconds, less once
every node is decided): a node is online when heard live and offline when silent longer
than ``PHRAME_NODE_TIMEOUT_S`` (default 20, as placement), on this host's clock, so a node
whose clock is off is judged right (the shared :class:`phrame.actual.ActualView`).
Exits 0 when every node is online and has applied its manifest and every environment
synced and placed, 1 when something needs attention, 2 when the broker cannot be read
(or the timeout setting is bad).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict

from phrame.actual import ActualView, liveness_filters
from phrame.cli.status_text import render_node, render_text
from phrame.cli.status_view import DEFAULT_NODE_TIMEOUT_S, Summary, summarize
from phrame.settings.env import EnvReader
from schemas import Topics
from schemas.container_exits import DEFAULT_WINDOW_S

POLL_S = 0.05


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--node",
        metavar="NAME",
        help="this node alone, with the last lines of each of its failing containers",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait for the broker, and at most for the nodes' live heartbeats",
    )


def run(args: argparse.Namespace) -> int:
    from phrame.cli.dev_target import NoDevStack, mqtt_env
    from phrame.mqtt import MqttClient, MqttError, MqttSettings, SettingsError

    try:
        env = mqtt_env()  # no broker setting: the dev stack's, when there is one
    except NoDevStack as e:
        print(f"phrame status: {e}", file=sys.stderr)
        return 2
    topics = Topics(EnvReader().topic_prefix())
    try:
        timeout_s = node_timeout()
        recent_s = EnvReader(error=ValueError).number("PHRAME_API_RECENT_EXIT_S", DEFAULT_WINDOW_S)
    except ValueError as e:
        print(f"phrame status: {e}", file=sys.stderr)
        return 2
    retained: dict[str, bytes] = {}
    # statuses and heartbeats, retained and live, judged on this host's clock
    view = ActualView(topics, timeout_s=timeout_s, log_invalid=False)
    clients = []
    try:
        # the container reports too: a container that died and runs again is mentioned
        containers = f"{topics.prefix}/actual/nodes/+/containers/+"
        planes = [("actual", [topics.node_status_filter(), topics.heartbeat_filter(), containers])]
        # each node's manifest: whether the node applied what was published for it
        manifests = f"{topics.prefix}/desired/nodes/+/manifest"
        planes.append(("desired", [topics.environments_filter(), manifests]))
        if MqttSettings.from_env("desired", env) == MqttSettings.from_env("actual", env):
            # one broker, one connection: a broker that makes the user name the client id (as
            # broker-config's does) throws out the first of two logins with one account
            planes = [("actual", planes[0][1] + planes[1][1])]
        for plane, filters in planes:
            client = MqttClient(MqttSettings.from_env(plane, env), f"phrame-status-{os.getpid()}-{plane}")
            clients.append(client)
            client.start(timeout=args.timeout)
            if plane == "actual":  # listening from here on
                for f, qos in liveness_filters(topics):
                    client.subscribe(f, view.on_message, timeout=args.timeout, qos=qos)
                view.resume(time.time())
            for f in filters:
                retained.update(client.collect_retained(f, timeout=args.timeout))
        listen_until(view, deadline=view.started_at + args.timeout)
    except (MqttError, SettingsError) as e:
        print(f"phrame status: cannot read the broker: {e}", file=sys.stderr)
        return 2
    finally:
        for client in clients:
            client.stop()
    now = time.time()
    summary = summarize(retained, now, topics, timeout_s, recent_s, view=view)
    if args.node is not None:
        return _show_node(summary, args.node, now, as_json=args.json)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else render_text(summary, now))
    return 0 if summary.is_healthy else 1


def _show_node(summary: Summary, name: str, now: float, *, as_json: bool) -> int:
    row = next((n for n in summary.nodes if n.node == name), None)
    if row is None:
        known = ", ".join(n.node for n in summary.nodes) or "none"
        print(f"phrame status: no node {name!r} on this broker (nodes: {known})", file=sys.stderr)
        return 2
    print(json.dumps(asdict(row), indent=2) if as_json else render_node(row, now))
    return 1 if row.needs_attention else 0


def listen_until(view: ActualView, *, deadline: float) -> None:
    """Listen until no node's verdict may change by listening longer (see
    :meth:`ActualView.unsettled`) or the clock reaches ``deadline``."""
    while view.unsettled() and time.time() < deadline:
        time.sleep(POLL_S)


def node_timeout() -> float:
    """``PHRAME_NODE_TIMEOUT_S`` read as placement reads it (default 20, at least 0.1)."""
    reader = EnvReader(error=ValueError)
    return reader.number("PHRAME_NODE_TIMEOUT_S", DEFAULT_NODE_TIMEOUT_S, minimum=0.1)
