"""``phrame node-agent [--once [--desired FILE] [--dry-run] [--json]]``.

Without ``--once`` it runs the agent loop until SIGTERM/SIGINT (then publishes
``offline``, leaves every container and process running and exits 0). With ``--once`` it
does one reconcile pass, prints the plan and the result, and exits 0 when converged, 1
when something failed. Desired state comes from the broker, or from FILE in the
``phrame render --format topics`` shape ({topic: payload}).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from node_agent.desired import DesiredStore
from node_agent.docker_port import DockerPort
from node_agent.errors import AgentError
from node_agent.loop import Agent
from node_agent.models import Clock
from node_agent.processes import ProcessSupervisor
from node_agent.reconcile import NodeReconciler, PassResult
from node_agent.settings import AgentSettings
from node_agent.sops_secrets import SopsSecrets
from phrame.mqtt import MqttClient, MqttError, MqttSettings
from phrame.settings import setup_logging
from phrame.settings.metrics_listen import start_listener
from phrame.settings.state import use_private_umask
from schemas import Topics


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="one pass: print plan and result")
    parser.add_argument(
        "--desired",
        metavar="FILE",
        help="with --once: read the desired state from FILE ({topic: payload}, as "
        "`phrame render --format topics` prints) instead of the broker",
    )
    parser.add_argument("--dry-run", action="store_true", help="with --once: change nothing")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")


def run(args: argparse.Namespace, *, wall_clock: Clock = time.time) -> int:
    """The command; ``wall_clock`` (heartbeat times, process start times) is ``time.time``
    but for a test's stand-in agent whose clock is off."""
    setup_logging()
    use_private_umask()  # process logs and records: 0600/0700; supervised processes keep theirs
    try:
        settings = AgentSettings.from_env()
    except AgentError as e:
        print(f"phrame node-agent: {e}", file=sys.stderr)
        return 2
    if args.once:
        return _run_once(settings, args)
    if args.desired or args.dry_run:
        print("phrame node-agent: --desired and --dry-run need --once", file=sys.stderr)
        return 2
    agent = _build_agent(settings, wall_clock)
    try:
        start_listener(agent.metrics.registry, settings.metrics_listen)
    except OSError as e:  # the port is taken or the address is not ours: a configuration error
        print(
            f"phrame node-agent: cannot listen on {settings.metrics_listen} for metrics: {e}", file=sys.stderr
        )
        return 2

    def on_signal(*_: object) -> None:
        # from another thread: the handler may interrupt the main thread inside an Event's
        # lock, and setting that Event right here would then deadlock
        threading.Thread(target=agent.stop, name="stop", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return agent.run()
    except MqttError as e:  # a refused login: a configuration error, not an outage
        print(f"phrame node-agent: {e}", file=sys.stderr)
        return 1


def _docker(settings: AgentSettings) -> DockerPort:
    return DockerPort(
        settings.node,
        registry_auth=settings.registry_auth,  # sent only for images from registry_url
        registry=settings.registry_url,
        stop_timeout=settings.stop_timeout_s,
        secrets_dir=settings.secrets_dir,
        sops=SopsSecrets(settings.age_keys),
    )


def _build_agent(settings: AgentSettings, wall_clock: Clock) -> Agent:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    docker = _docker(settings)
    return Agent(
        settings,
        docker=docker,
        supervisor=ProcessSupervisor(
            settings.state_dir,
            stop_timeout=settings.stop_timeout_s,
            secrets_dir=settings.secrets_dir,
            wall_clock=wall_clock,
            sops=SopsSecrets(settings.age_keys),
        ),
        desired_mqtt=MqttSettings.from_env(plane="desired"),
        actual_mqtt=MqttSettings.from_env(plane="actual"),
        own_container_id=docker.find_own_container(),
        wall_clock=wall_clock,
    )


def _read_desired(settings: AgentSettings, path: str | None) -> DesiredStore:
    topics = Topics(settings.topic_prefix)
    store = DesiredStore(topics, settings.node, max_payload_bytes=settings.max_payload_bytes)
    mine = topics.desired_node(settings.node) + "/"
    if path is not None:
        doc: dict[str, Any] = json.loads(Path(path).read_text("utf-8"))
        for topic, payload in sorted(doc.items()):
            if topic.startswith(mine):
                store.apply(topic, json.dumps(payload).encode() if payload else None)
        return store
    client = MqttClient(MqttSettings.from_env(plane="desired"), f"phrame-agent-{settings.node}-once")
    client.start()
    try:
        store.apply_all(client.collect_retained(topics.desired_node_filter(settings.node)))
    finally:
        client.stop()
    return store


def _run_once(settings: AgentSettings, args: argparse.Namespace) -> int:
    try:
        store = _read_desired(settings, args.desired)
    except (OSError, ValueError) as e:
        print(f"phrame node-agent: cannot read {args.desired}: {e}", file=sys.stderr)
        return 2
    except MqttError as e:
        print(f"phrame node-agent: cannot read the desired state: {e}", file=sys.stderr)
        return 1
    docker = _docker(settings)
    supervisor = ProcessSupervisor(
        settings.state_dir,
        stop_timeout=settings.stop_timeout_s,
        secrets_dir=settings.secrets_dir,
        sops=SopsSecrets(settings.age_keys),
    )
    reconciler = NodeReconciler(
        settings.node,
        docker,
        supervisor=supervisor,
        parallelism=settings.parallelism,
        own_container_id=docker.find_own_container(),
        shared_daemon=settings.shared_daemon,
        policy=settings.policy,
    )
    desired = store.snapshot()
    start = time.monotonic()
    try:
        result = reconciler.run_pass(desired, dry_run=args.dry_run)
    except AgentError as e:
        print(f"phrame node-agent: {e}", file=sys.stderr)
        return 1
    report = result.to_dict() | {
        "node": settings.node,
        "manifest": "complete" if desired.is_complete else "incomplete or absent",
        "invalid_payloads": store.errors(),
        "seconds": round(time.monotonic() - start, 3),
    }
    _print(report, result, as_json=args.json)
    return 0 if (result.converged and not store.errors()) or args.dry_run else 1


def _print(report: dict[str, Any], result: PassResult, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    print(f"node {report['node']}: manifest {report['manifest']}")
    print(f"plan ({len(result.plan.actions)} actions):")
    for a in result.plan.actions:
        print(f"  {a.describe()}")
    for o in result.outcomes:
        status = "ok    " if o.ok else "FAILED"
        print(f"  {status} {o.action.describe()}" + (f": {o.error}" if o.error else ""))
    for topic, error in report["invalid_payloads"].items():
        print(f"  invalid payload ignored: {topic}: {error}")
    for error in result.plan.errors:
        print(f"  refused: {error}")
    print("converged" if result.converged else "NOT converged", f"in {report['seconds']}s")
