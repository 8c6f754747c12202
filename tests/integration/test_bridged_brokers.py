"""A hub broker and a site broker bridged as ``phrame broker-config`` generates them.

Two real mosquitto processes with TLS and password auth; ``phrame config-sync`` and
``phrame placement`` on the hub against a real bare repo; a real ``phrame node-agent`` on
the site broker, running busybox containers on the real daemon. The desired plane crosses
in, the actual plane out, both ACLs hold, a site broker restart loses nothing (with the hub
up, and with the hub down: the site's own store keeps its agents converged), and the hub
hears the site again after its own restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from node_agent.models import SERVICE
from phrame.mqtt import MqttClient, PublishRefused
from schemas import Topics
from tests.support.agent_support import AgentEnv, AgentProcess
from tests.support.bridged import BRIDGE, SITE, Broker, generate, service
from tests.support.services import free_port, stop_process
from tests.support.sync_support import ConfigRemote
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt, pytest.mark.docker]
T = Topics()


@pytest.fixture
def env(docker_client: docker.DockerClient, busybox_image: str, docker_cleanup: str) -> Iterator[AgentEnv]:
    agent_env = AgentEnv(docker_client, busybox_image, docker_cleanup)
    yield agent_env
    # io.phrame.* labels are reserved in a repo: this test's unique node label marks its containers
    for c in agent_env.managed():
        c.remove(force=True)


def repo_files(env: AgentEnv, *, version: int) -> dict[str, str | None]:
    def svc(name: str, placement: str, sleep: int = 3600) -> str:
        return (f"name: {name}\nimage: {env.image}\ncommand: [\"sleep\", \"{sleep}\"]\n"
                f"restart: \"no\"\nstop_grace_period: 1s\nplacement:\n{placement}")  # fmt: skip

    here = f"  node: {env.node}\n"
    return {
        f"nodes/{env.node}.yaml": f"name: {env.node}\nlabels:\n  site: {SITE}\n",
        f"nodes/{env.node}-2.yaml": f"name: {env.node}-2\nlabels:\n  site: {SITE}\n",
        "nodes/hq-01.yaml": "name: hq-01\nlabels:\n  site: hq\n",
        f"environments/{env.env}/environment.yaml": f"name: {env.env}\nplacement: auto\n",
        f"environments/{env.env}/services/pinned.yaml": svc("pinned", here, 3600 + version),
        f"environments/{env.env}/services/placed.yaml": svc("placed", f"  labels:\n    site: {SITE}\n"),
        f"environments/{env.env}/services/gone.yaml": svc("gone", here) if version == 1 else None,
        f"environments/{env.env}/services/hq.yaml": svc("hq", "  node: hq-01\n"),
    }


def push(remote: ConfigRemote, message: str, files: dict[str, str | None]) -> str:
    remote.work.git.pull("--rebase", "origin", "main")  # placement commits node.json to main
    return remote.commit(message, files=files)


def retained(client: MqttClient, pattern: str) -> dict[str, Any]:
    got = client.collect_retained(pattern, settle=0.3)
    return {t: json.loads(p) for t, p in got.items() if p}


def converged_at(client: MqttClient, env: AgentEnv) -> str | None:
    """The commit of the environment's newest deploy record if it converged (on ``client``'s broker)."""
    doc = retained(client, T.env_deploys(env.env)).get(T.env_deploys(env.env))
    top = doc["deploys"][0] if doc and doc["deploys"] else None
    return top["commit"] if top and top["state"] == "converged" else None


def running(env: AgentEnv) -> dict[str, Any]:
    return {c.labels[SERVICE]: c for c in env.managed() if c.status == "running"}


Runs = dict[str, tuple[str, str]]  # service -> (container id, when it started)


def runs(env: AgentEnv) -> Runs:
    return {svc: (c.id, c.attrs["State"]["StartedAt"]) for svc, c in running(env).items()}


def ended_since(env: AgentEnv, before: Runs) -> set[str]:
    """Services of this node whose container of ``before`` is gone, replaced or was started
    again since. Not from Docker's event history: the daemon keeps only its last 256 events,
    which the other tests sharing it overrun (this assertion once saw half the events)."""
    now = runs(env)
    return {svc for svc, run in before.items() if now.get(svc) != run}


def acl_of_bridge_account(hub: Broker, node: str, clients: list[MqttClient]) -> None:
    """The hub lets the bridge write its own site's actual topics and nothing else. Checked
    before the site starts: the account's client id is the bridge's own."""
    bridge = hub.client(BRIDGE, clients)
    for topic in (T.manifest(node), T.status("hq-01")):
        with pytest.raises(PublishRefused):
            bridge.publish_batch([(topic, b'{"forged": true}')], timeout=5)
    bridge.publish_batch([(T.status(node), b'{"probe": 1}'), (T.status(node), None)], timeout=5)
    bridge.stop()
    clients.remove(bridge)


@pytest.mark.slow
def test_hub_and_site_carry_the_planes_and_survive_a_site_restart(
    tmp_path: Path, env: AgentEnv, docker_client: docker.DockerClient, clients: list[MqttClient]
) -> None:
    remote = ConfigRemote(tmp_path / "git")
    first = remote.commit("bridged: first", files=repo_files(env, version=1))
    hub, site = generate(remote.work_path, site_nodes=[env.node, f"{env.node}-2"])
    procs = []
    agent: AgentProcess | None = None
    logs = tmp_path / "logs"
    logs.mkdir()

    def why() -> str:
        texts = [f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(logs.iterdir())]
        return "\n".join([*texts, f"--- hub\n{hub.log()[-2000:]}", f"--- site\n{site.log()[-2000:]}"])

    try:
        hub.start()
        acl_of_bridge_account(hub, env.node, clients)
        site.start()
        repo = {"PHRAME_REPO_URL": str(remote.bare_path)}
        procs.append(service(["config-sync"], repo | hub.env("config-sync") | {
            "PHRAME_STATE_DIR": str(tmp_path / "sync"), "PHRAME_POLL_S": "1", "PHRAME_DEBOUNCE_S": "0",
            "PHRAME_LISTEN": f"127.0.0.1:{free_port()}", "PHRAME_WEBHOOK_SECRET": "s3cret",
        }, logs / "config-sync.log"))  # fmt: skip
        on_hub = hub.client("observer", clients)
        # placement starts once the first commit is published: its own commit then changes the
        # site's node alone, a deployment the agent can converge. Read first by config-sync,
        # placement's commit would be one deployment with hq-01, which no agent runs: never converged
        wait_for(lambda: retained(on_hub, T.manifest(env.node)).get(T.manifest(env.node), {}).get("commit") == first,
                 "config-sync published the first commit on the hub", 30, observe=why)  # fmt: skip
        procs.append(service(["placement"], repo | hub.env("placement") | {
            "PHRAME_STATE_DIR": str(tmp_path / "placement"), "PHRAME_PLACEMENT_INTERVAL_S": "0.5",
        }, logs / "placement.log"))  # fmt: skip
        agent_env = env.process_env(str(tmp_path / "agent"), **site.env(f"node-{env.node}"))
        agent = AgentProcess(agent_env, str(logs / "agent.log"))
        on_site = site.client("observer", clients)

        # placement on the hub saw the agent's heartbeats through the bridge and placed
        # `placed` on the site's node; config-sync's deploy record saw it converge
        def head() -> str:
            return str(remote.work.git.ls_remote("origin", "main").split()[0])

        wait_for(lambda: converged_at(on_hub, env) == head() and set(running(env)) >= {"pinned", "placed", "gone"},
                 "the placement commit converged on the site's node", 90, observe=why)  # fmt: skip
        mine = f"{T.prefix}/desired/nodes/{env.node}/#"
        hub_desired, site_desired = retained(on_hub, mine), retained(on_site, mine)
        assert T.manifest(env.node) in site_desired and len(site_desired) == 4  # manifest + 3 items
        assert site_desired == hub_desired
        assert not retained(on_site, f"{T.prefix}/desired/nodes/hq-01/#"), "another site's desired crossed"
        actual = retained(on_hub, T.actual_filter(env.node))
        assert actual[T.status(env.node)]["commit"] == head() and T.heartbeat(env.node) in actual
        assert {t.rsplit(".", 2)[-2] for t in actual if "/containers/" in t} == {"pinned", "placed", "gone"}

        # the site's ACL: a node account writes only its own node's actual topics
        other = site.client(f"node-{env.node}-2", clients)
        with pytest.raises(PublishRefused):
            other.publish_batch([(T.status(env.node), b'{"state": "offline"}')], timeout=5)

        # the site broker restarts while a commit is published on the hub
        placed = running(env)["placed"]
        since, before = time.time(), runs(env)
        site.stop()
        second = push(remote, "bridged: pinned v2, gone removed", repo_files(env, version=2))
        wait_for(lambda: retained(on_hub, T.manifest(env.node)).get(T.manifest(env.node), {}).get("commit") == second,
                 "config-sync published the second commit on the hub", 30, observe=why)  # fmt: skip
        site.start()
        wait_for(lambda: converged_at(on_hub, env) == second and set(running(env)) == {"pinned", "placed"},
                 "the agent converged on the commit published while its broker was down", 60, observe=why)  # fmt: skip
        wait_for(lambda: on_site.is_connected, "the observer back on the site broker", 20)
        assert retained(on_site, mine) == retained(on_hub, mine)
        assert len(retained(on_site, mine)) == 3  # manifest + pinned + placed: gone's item cleared
        placed.reload()
        assert running(env)["placed"].id == placed.id and placed.attrs["RestartCount"] == 0
        ended = ended_since(env, before)
        assert ended == {"pinned", "gone"}, f"containers ended during the site restart: {ended}"

        # the hub is down and the site restarts: its own store still holds every node's
        # complete desired state, so the agent keeps what runs and reports it converged
        kept, since, before = retained(on_site, mine), time.time(), runs(env)
        hub.stop()
        site.stop()
        site.start()
        wait_for(lambda: on_site.is_connected, "the observer back on the site broker", 20)
        assert retained(on_site, mine) == kept
        status, beat = T.status(env.node), T.heartbeat(env.node)

        def passes_since_restart() -> int:  # the agent's passes, once it heartbeats after the restart
            doc = retained(on_site, beat).get(beat) or {}
            return int(doc["counts"].get("passes", 0)) if doc.get("ts", 0) > since else -1

        wait_for(lambda: passes_since_restart() >= 0, "the agent back on the site broker", 30, observe=why)
        first = passes_since_restart()
        wait_for(lambda: passes_since_restart() >= first + 2, "a whole agent pass, hub down", 30, observe=why)
        assert retained(on_site, status)[status]["converged"] is True
        assert set(running(env)) == {"pinned", "placed"}

        # the hub comes back (with its store): the bridge reconnects within its backoff and
        # the hub hears the node's fresh heartbeats again; both planes agree once more
        hub_back = time.time()
        hub.start()
        wait_for(lambda: on_hub.is_connected, "the observer back on the hub", 20)
        wait_for(lambda: (retained(on_hub, beat).get(beat) or {}).get("ts", 0) > hub_back,
                 "a heartbeat through the bridge after the hub's restart", 60, observe=why)  # fmt: skip
        assert retained(on_hub, status)[status]["commit"] == second
        assert retained(on_hub, mine) == retained(on_site, mine)
        ended = ended_since(env, before)
        assert not ended, f"containers ended while the hub was down or restarting: {ended}"
    finally:
        if agent is not None:
            agent.terminate()
        for proc in procs:
            stop_process(proc)
        site.stop()
        hub.stop()
