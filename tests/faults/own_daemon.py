"""A node of the fault stack on a Docker daemon of its own (fault 2), with its own agent.

The case that restarts dockerd must not restart the machine's shared daemon, so this node
runs on a :class:`PrivateDockerd` with one ``phrame node-agent`` started here (stopped by
pid), joined to the fault stack's broker and config repo by a push of ``nodes/<node>.yaml``
and services pinned to it. :meth:`OwnDaemonNode.leave` takes it out again (a push, the agent
stopped, its retained actual topics cleared as a person retiring a host would), so the later
cases find the stack as it was. It touches no Docker object of the shared daemon.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import docker

from phrame.mqtt import MqttClient
from phrame.mqtt.broker_config import node_account
from tests.faults.harness import FaultStack
from tests.support.docker import busybox_image, labels
from tests.support.private_dockerd import PrivateDockerd
from tests.support.processes import end

IMAGE = "phrame-quickstart/busybox:1"  # what harness.service() runs, imported into this daemon
#: the agent's production resync: the recovery must come from the daemon's return, not a timer
RESYNC_S = "30"


class OwnDaemonNode:
    def __init__(self, faults: FaultStack, dockerd: PrivateDockerd, root: Path) -> None:
        self.faults, self.dockerd, self.root = faults, dockerd, root
        self.name = f"{faults.stack.prefix}-own"
        self.client = dockerd.client()
        self.agent: subprocess.Popen[bytes] | None = None
        self.agent_log = root / "agent.log"
        self.services: list[str] = []
        self.unmanaged: list[str] = []

    # -- joining and leaving the stack
    def join(self, services: dict[str, str]) -> None:
        """Our image and an unmanaged container in the daemon, the agent, then the push of
        the node's file and ``services`` (name -> YAML, pinned to :attr:`name`)."""
        s = self.faults.stack
        busybox_image(self.client, IMAGE)
        c = self.client.containers.run(
            IMAGE,
            ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"],
            detach=True,
            labels=labels(self.faults.run),
            name=f"faults-unmanaged-own-{self.dockerd.tag}",
            restart_policy={"Name": "unless-stopped"},  # back after the restart, as ours are
        )
        self.unmanaged.append(c.id)
        self.faults.stack.add_node_account(self.name)  # the broker knows only the stack's own nodes
        self.start_agent()
        self.faults.daemons[self.name] = self.client
        node = f"name: {self.name}\nlabels:\n  pool: own-daemon\ncapacity:\n  cpus: 2\n  memory: 2Gi\n"
        (s.clone / "nodes" / f"{self.name}.yaml").write_text(node)
        for name, text in services.items():
            s.env_file(f"services/{name}.yaml").write_text(text)
        self.services = list(services)
        sha, _ = s.commit_and_push(f"faults: node {self.name} on a daemon of its own")
        self.faults.settle(f"{self.name} joined at {sha[:12]}", 60)

    def leave(self) -> None:
        """The node's files removed by a push, its agent stopped, its reports cleared."""
        s = self.faults.stack
        if self.name in self.faults.daemons:
            (s.clone / "nodes" / f"{self.name}.yaml").unlink(missing_ok=True)
            for name in self.services:
                s.env_file(f"services/{name}.yaml").unlink(missing_ok=True)
            s.commit_and_push(f"faults: node {self.name} retired")
        self.stop_agent()
        self.faults.daemons.pop(self.name, None)
        # an offline node left behind would be reported: cleared with the node's own account,
        # the one that may write its reports (its agent is stopped, so no connection is taken)
        mqtt = MqttClient(s.login(node_account(self.name)), node_account(self.name))
        try:
            mqtt.start(timeout=10)
            held = mqtt.collect_retained(f"phrame/actual/nodes/{self.name}/#", timeout=5)
            mqtt.publish_batch([(topic, None) for topic in held], timeout=10)
        finally:
            mqtt.stop()
        with s._lock:
            s.statuses.pop(self.name, None)
        self.client.close()

    # -- the agent, by pid
    def start_agent(self) -> None:
        s = self.faults.stack
        env = (
            s.child_env
            | s.login_env(node_account(self.name))
            | {
                "PHRAME_NODE_NAME": self.name,
                "PHRAME_STATE_DIR": str(self.root / "agent-state"),
                "PHRAME_RESYNC_S": RESYNC_S,
                "PHRAME_LOG_FORMAT": "text",
                "PYTHONUNBUFFERED": "1",
                "DOCKER_HOST": self.dockerd.host,
            }
        )
        with open(self.agent_log, "ab") as out:
            self.agent = subprocess.Popen(
                [sys.executable, "-m", "phrame", "node-agent"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop_agent(self) -> int | None:
        """SIGTERM (it says offline), SIGKILL after 30 s; its exit code."""
        proc, self.agent = self.agent, None
        return end(proc)

    # -- reading
    def containers(self) -> list[docker.models.containers.Container]:
        """Every container of this daemon (all are this test's)."""
        return list(self.client.containers.list(all=True, ignore_removed=True))

    def unmanaged_touched(self, since: float) -> set[str]:
        """Our unmanaged containers that are gone, not running, or had any event since
        ``since`` (a unix time after the daemon answered again: its own start-up restarts
        come before). Only the agent could have touched them then."""
        touched = set()
        until = f"{time.time():.9f}"
        for cid in self.unmanaged:
            try:
                if self.client.containers.get(cid).status != "running":
                    touched.add(cid)
            except docker.errors.NotFound:
                touched.add(cid)
                continue
            events = self.client.api.events(
                since=f"{since:.9f}", until=until, filters={"container": cid}, decode=True
            )
            if [e.get("Action") for e in events]:
                touched.add(cid)
        return touched

    def log(self) -> str:
        try:
            return self.agent_log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tails(self, lines: int = 40) -> str:
        agent = [f"--- agent {self.name} ({self.agent_log})", *self.log().splitlines()[-lines:]]
        return "\n".join([*agent, self.dockerd.log_tail()])
