"""One worker process of the simulated fleet: real node agents over simulated Docker daemons.

``benchmarks/fleet_scale.py`` (and its integration test) start a few of these, each running
the agents of a share of the nodes: ``node_agent.loop.Agent`` as ``phrame node-agent`` builds
it (its own MQTT connection, subscription, heartbeat thread and last will per node) with a
:class:`sim_docker.SimulatedDocker` where the real Docker adapter would be. Controlled over
stdin, one command a line (``stop NODE``: that agent stops as on SIGTERM, publishing
``offline``; ``quit``, or end of input: every agent stops); it answers on stdout
(``connected N``, ``stopped NODE``, ``bye``). It never touches Docker or the host.

Usage: ``python benchmarks/fleet_sim.py --broker mqtt://127.0.0.1:PORT --state DIR NODE...``
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from sim_docker import SimulatedDocker  # noqa: E402

from node_agent.loop import Agent  # noqa: E402
from node_agent.processes import ProcessSupervisor  # noqa: E402
from node_agent.settings import AgentSettings  # noqa: E402
from phrame.mqtt import MqttSettings  # noqa: E402

CONNECT_TIMEOUT_S = 120.0
# paho's network loop uses select(), which fails (connection lost) for a descriptor >= 1024;
# each agent holds three (its socket and paho's wake-up pair): a process holds ~300 at most
MAX_AGENTS = 250


def raise_fd_limit() -> None:
    """One socket (and paho's two wake-up sockets) per agent: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def build(node: str, broker: str, state: Path, *, heartbeat_s: float, resync_s: float) -> Agent:
    settings = AgentSettings(
        node=node, heartbeat_s=heartbeat_s, resync_s=resync_s, state_dir=state / node, topic_prefix="phrame"
    )
    mqtt = MqttSettings(url=broker)
    return Agent(
        settings,
        docker=SimulatedDocker(node),
        supervisor=ProcessSupervisor(settings.state_dir),
        desired_mqtt=mqtt,
        actual_mqtt=mqtt,
    )


def say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", required=True)
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--heartbeat-s", type=float, default=5.0)
    parser.add_argument("--resync-s", type=float, default=30.0)
    parser.add_argument("nodes", nargs="+")
    args = parser.parse_args(argv)
    if len(args.nodes) > MAX_AGENTS:
        parser.error(f"{len(args.nodes)} nodes: at most {MAX_AGENTS} per process (paho's select() limit)")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    raise_fd_limit()
    agents = {
        n: build(n, args.broker, args.state, heartbeat_s=args.heartbeat_s, resync_s=args.resync_s)
        for n in args.nodes
    }
    threads = {n: threading.Thread(target=a.run, name=f"agent-{n}", daemon=True) for n, a in agents.items()}
    for t in threads.values():
        t.start()
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while not all(a.actual_client.is_connected for a in agents.values()):
        if time.monotonic() > deadline:
            missing = [n for n, a in agents.items() if not a.actual_client.is_connected]
            say(f"error {len(missing)} agents not connected after {CONNECT_TIMEOUT_S:.0f} s: {missing[:5]}")
            break
        time.sleep(0.1)
    else:
        say(f"connected {len(agents)}")
    for line in sys.stdin:
        command, _, node = line.strip().partition(" ")
        if command == "stop" and node in agents:
            agents[node].stop()
            threads[node].join(15)
            say(f"stopped {node}")
        elif command == "quit":
            break
    for agent in agents.values():
        agent.stop()
    for t in threads.values():
        t.join(15)
    say("bye")
    return 0


if __name__ == "__main__":
    sys.exit(main())
