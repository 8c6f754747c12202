"""The agent loop as a subprocess against real mosquitto and dockerd.

Desired state is published retained to the broker; the agent's actual-plane reports are
read back with a watcher. Covers triggers, repair, the restart verb, bad payloads, a
broker restart without persistence, and SIGTERM.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from node_agent.docker_port import DockerPort
from node_agent.loop import Agent
from node_agent.processes import ProcessSupervisor
from node_agent.settings import AgentSettings
from phrame.mqtt import Message, MqttSettings
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.handover import Presence, handover_services, render_node
from tests.support.services import wait_until
from tests.support.waiting import wait_for

T = Topics()


@pytest.fixture
def agent(mosquitto, env: AgentEnv, tmp_path: Path) -> Iterator[AgentProcess]:
    proc = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    yield proc
    proc.terminate()


def running(env: AgentEnv, name: str) -> bool:
    return env.exists(name) and env.get(name).status == "running"


def converged_on(watcher: ActualWatcher, generation: int = 1) -> bool:
    s = watcher.status()
    return bool(s) and s["state"] == "online" and s["converged"] and s["generation"] == generation


@pytest.mark.slow
def test_loop_converges_reports_repairs_and_exits_cleanly(
    env: AgentEnv, watcher: ActualWatcher, agent: AgentProcess
):
    web, db = env.container("web"), env.container("db")
    watcher.publish(spec.topics_doc(env.node, [web, db]))
    watcher.wait_for(lambda: converged_on(watcher), what="converged status")
    assert running(env, web["name"]) and running(env, db["name"])
    item = watcher.item("containers", web["name"])
    assert item["state"] == "running" and item["digest"] == web["digest"]
    assert item["image_id"] and item["started_at"]
    watcher.wait_for(
        lambda: (watcher.latest.get(T.heartbeat(env.node)) or {}).get("seq", 0) >= 2,
        what="heartbeats",
    )
    assert watcher.latest[T.heartbeat(env.node)]["host"]["mem_total"] > 0

    # docker kill: back within one resync (a die event triggers it sooner)
    env.get(web["name"]).kill()
    wait_until(lambda: running(env, web["name"]), "killed container back", 10)
    # docker rm -f: recreated
    env.client.api.remove_container(db["name"], force=True)
    wait_until(lambda: running(env, db["name"]), "removed container recreated", 10)

    # a digest change published: recreated, old id gone
    old_id = env.get(web["name"]).id
    web2 = env.container("web", command=["sleep", "3602"])
    doc = spec.topics_doc(env.node, [web2, db])
    doc[T.manifest(env.node)]["generation"] = 2
    watcher.publish(doc)
    watcher.wait_for(lambda: converged_on(watcher, 2), what="generation 2")
    assert env.get(web["name"]).id != old_id

    # the restart verb restarts one managed container; other verbs are refused
    started = env.get(db["name"]).attrs["State"]["StartedAt"]
    watcher.client.publish(T.restart(env.node, db["name"]), spec.restart_payload(), False)
    wait_until(lambda: env.get(db["name"]).attrs["State"]["StartedAt"] != started, "restart", 15)
    watcher.client.publish(f"phrame/cmd/nodes/{env.node}/containers/{db['name']}/stop", b"{}", False)
    wait_until(lambda: "refused command" in agent.log(), "the stop verb refused", 15)  # before SIGTERM

    # SIGTERM: offline published, exit 0, containers left running
    assert agent.terminate() == 0, agent.log()
    watcher.wait_for(lambda: watcher.status()["state"] == "offline", 10, "offline status")
    assert running(env, web["name"]) and running(env, db["name"])


@pytest.mark.slow
def test_bad_payloads_are_reported_and_change_nothing(
    env: AgentEnv, watcher: ActualWatcher, agent: AgentProcess
):
    web = env.container("web")
    watcher.publish(spec.topics_doc(env.node, [web]))
    watcher.wait_for(lambda: converged_on(watcher), what="converged")
    web_id = env.get(web["name"]).id
    bad = env.container("bad")
    item = T.desired_item(env.node, "containers", bad["name"])
    watcher.client.publish_batch([(item, b"{not json")])
    watcher.wait_for(lambda: any("invalid JSON" in e for e in watcher.status()["errors"]))
    watcher.client.publish_batch([(item, b'{"kind": "container"}')])
    watcher.wait_for(lambda: any("required" in e for e in watcher.status()["errors"]))
    big = T.desired_item(env.node, "containers", f"{env.env}.big.0")
    watcher.client.publish_batch([(big, b"x" * (60 * 1024 * 1024))], timeout=60)
    watcher.wait_for(lambda: any("exceeds" in e for e in watcher.status()["errors"]), 60)
    # a whole pass after the last bad payload: the bad items changed nothing, and the status
    # that pass published still names both (errors are state, not a one-off event)
    watcher.wait_passes(2)
    assert [c.id for c in env.managed()] == [web_id]
    errors = watcher.status()["errors"]
    assert any(bad["name"] in e and "required" in e for e in errors), errors
    assert any(f"{env.env}.big.0" in e and "exceeds" in e for e in errors), errors
    watcher.client.publish_batch([(big, None), (item, None)])  # clear the retained junk


def test_a_message_for_another_node_is_reported_and_changes_nothing(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    """The broker never sends the agent another node's topic (it subscribes to its own), so
    the message is handed to the agent's desired-message handler directly."""
    url = MqttSettings(url=mosquitto.url)
    settings = AgentSettings(node=env.node, state_dir=tmp_path / "state")
    port = DockerPort(env.node, client=env.client, stop_timeout=1)
    supervisor = ProcessSupervisor(settings.state_dir)
    agent = Agent(settings, docker=port, supervisor=supervisor, desired_mqtt=url, actual_mqtt=url)
    agent.actual_client.start()
    try:
        web, intruder = env.container("web"), env.container("intruder")
        for topic, payload in spec.topic_messages(spec.topics_doc(env.node, [web])).items():
            agent._on_desired(Message(topic, payload, True))
        agent.run_pass()
        watcher.wait_for(lambda: converged_on(watcher), what="converged")
        before = [(c.id, c.status) for c in env.managed()]
        other = T.desired_item(f"{env.node}-other", "containers", intruder["name"])
        agent._on_desired(Message(other, json.dumps(intruder).encode(), True))
        agent.run_pass()
        assert "not for node" in agent.store.errors()[other]
        watcher.wait_for(
            lambda: any(other in e and "not for node" in e for e in watcher.status()["errors"]),
            what="the error on the node status",
        )
        assert not watcher.status()["converged"] or watcher.status()["errors"]
        assert [(c.id, c.status) for c in env.managed()] == before
        assert not env.exists(intruder["name"])
        assert intruder["name"] not in agent.store.snapshot().containers
    finally:
        agent.actual_client.stop()


@pytest.mark.slow
def test_broker_restart_without_persistence_keeps_everything_running(
    env: AgentEnv, watcher: ActualWatcher, agent: AgentProcess, mosquitto
):
    specs = [env.container(f"s{i}") for i in range(3)]
    watcher.publish(spec.topics_doc(env.node, specs))
    watcher.wait_for(lambda: converged_on(watcher), what="converged")
    ids = sorted(c.id for c in env.managed())
    status, first = T.status(env.node), T.actual_item(env.node, "containers", specs[0]["name"])
    before = {t: watcher.counts.get(t, 0) for t in (status, first)}
    mosquitto.restart()  # persistence false: every retained message is gone
    # the agent reconnects and republishes its state; it removes nothing
    # (mosquitto may send the agent's will on shutdown: wait for online, not any status)
    watcher.wait_for(lambda: watcher.counts[first] > before[first], 40, "items again")
    watcher.wait_for(lambda: watcher.status()["state"] == "online", 10, "online again")
    assert watcher.counts[status] > before[status]
    watcher.wait_passes(3)  # two whole passes after the reconnect
    assert sorted(c.id for c in env.managed()) == ids
    assert all(c.status == "running" for c in env.managed())


def test_sigkilled_agent_is_reported_offline_by_its_will(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    proc = AgentProcess(
        env.process_env(
            str(tmp_path / "state"),
            PHRAME_DESIRED_MQTT_URL=mosquitto.url,
            PHRAME_MQTT_WILL_DELAY_S="0",
        ),
        str(tmp_path / "agent.log"),
    )
    try:
        watcher.wait_for(lambda: (watcher.status() or {}).get("state") == "online", 20, "online")
    finally:
        proc.kill()
    watcher.wait_for(lambda: watcher.status()["state"] == "offline", 20, "will: offline")


@pytest.mark.slow
def test_rendered_replaces_through_the_loop_with_no_gap(
    env: AgentEnv, watcher: ActualWatcher, agent: AgentProcess, tmp_path: Path
):
    # exactly what config-sync publishes: the replaced container is still in it
    rendered = render_node(tmp_path / "repo", env, handover_services(["sleep", "600"]))
    old, proc = f"{env.env}.legacy.0", f"{env.env}.mon.0"
    assert T.desired_item(env.node, "containers", old) in rendered
    try:
        with Presence(env, old, tmp_path / "state") as presence:
            watcher.client.publish_batch(sorted(rendered.items()))
            wait_for(lambda: env.exists(old), "the replaced container made with the process", 40)
            wait_for(lambda: not env.exists(old), "the replaced container removed", 40)
            watcher.wait_for(lambda: converged_on(watcher), what="converged on the rendering")
            watcher.wait_passes(3)  # two whole passes more: the container is not created again
        assert not env.exists(old) and presence.process_up()
        assert presence.gaps() == []
        assert watcher.status()["errors"] == [] and converged_on(watcher)
        assert watcher.item("processes", proc)["state"] == "running"
        assert watcher.item("containers", old) is None  # cleared, not reported missing
        assert agent.terminate() == 0
        assert presence.process_up(), "SIGTERM leaves processes running"
    finally:
        agent.terminate()
        ProcessSupervisor(tmp_path / "state").stop(proc)  # clean up by recorded pid
        for c in env.managed():  # a rendered container cannot carry the test label
            c.remove(force=True)


def test_a_later_pass_waits_for_an_unhealthy_dependency(env: AgentEnv):
    """Passes as the loop runs them: api depends on db, which runs but is unhealthy. No pass
    creates api until db is healthy, whether or not that pass touched db."""
    check = {"test": ["CMD", "test", "-f", "/tmp/ok"], "interval": "200ms", "retries": 1}
    db = env.container("db", healthcheck=check)
    api = env.container("api", depends_on=[db["name"]])
    desired = spec.desired([db, api], with_manifest=True)
    reconciler = env.reconciler(ready_timeout=1.0)
    first = reconciler.run_pass(desired)  # creates db, then waits for it in vain
    assert [a.target for a in first.plan.actions][1:] == [db["name"], api["name"]]
    assert not env.exists(api["name"])

    def db_health() -> str:
        return str(env.get(db["name"]).attrs["State"].get("Health", {}).get("Status"))

    wait_until(lambda: db_health() == "unhealthy", "db unhealthy", 20)
    later = reconciler.run_pass(desired)  # db left alone by this pass: api still waits
    assert [(a.op.value, a.target) for a in later.plan.actions][1:] == [("create", api["name"])]
    assert not env.exists(api["name"]), "api created while its dependency is unhealthy"
    # failed fast (not the 1 s ready timeout, whose message also says "health unhealthy")
    assert any(f"{db['name']} is unhealthy" in e for e in later.errors), later.errors
    env.get(db["name"]).exec_run(["touch", "/tmp/ok"])
    wait_until(lambda: db_health() == "healthy", "db healthy", 20)
    assert reconciler.run_pass(desired).converged
    assert running(env, api["name"])


def test_reports_of_items_removed_while_the_agent_was_down_are_cleared(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    web = env.container("web")
    watcher.publish(spec.topics_doc(env.node, [web]))
    stale = T.actual_item(env.node, "containers", f"{env.env}.gone.0")
    # a report left on the broker by an earlier agent run, for an item that no longer exists
    watcher.publish({stale: {"state": "running", "digest": web["digest"]}})
    watcher.wait_for(lambda: watcher.latest.get(stale) is not None, 10, "the stale report")
    proc = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    try:
        watcher.wait_for(lambda: converged_on(watcher), what="converged")
        watcher.wait_for(lambda: watcher.latest.get(stale, "x") is None, 10, "the stale report cleared")
        assert watcher.item("containers", web["name"])["state"] == "running"
    finally:
        assert proc.terminate() == 0


def test_after_a_pass_that_touched_no_network_the_networks_are_not_listed_again(
    env: AgentEnv, watcher: ActualWatcher, mosquitto, tmp_path: Path
):
    """The look after a pass (what its reports show) lists the containers again, and the
    networks only when the pass created or removed one: nothing else changes them."""
    url = MqttSettings(url=mosquitto.url)
    settings = AgentSettings(node=env.node, state_dir=tmp_path / "state")
    port = DockerPort(env.node, client=env.client, stop_timeout=1)
    agent = Agent(
        settings,
        docker=port,
        supervisor=ProcessSupervisor(settings.state_dir),
        desired_mqtt=url,
        actual_mqtt=url,
    )
    agent.actual_client.start()

    def pass_on(specs: list[dict[str, Any]]) -> Counter[str]:
        for topic, payload in spec.topic_messages(spec.topics_doc(env.node, specs)).items():
            agent._on_desired(Message(topic, payload, True))
        port.calls.clear()
        agent.run_pass()
        return Counter(port.calls)

    try:
        net = env.network("back")
        created = pass_on([net, env.container("web", networks=[net["name"]])])
        assert created["create_network"] == 1, created
        # the network it created is reported: the look after that pass listed the networks
        net_topic = T.actual_item(env.node, "networks", net["name"])
        present = lambda: (watcher.latest.get(net_topic) or {}).get("state") == "present"  # noqa: E731
        watcher.wait_for(lambda: converged_on(watcher) and present(), what="the network reported present")
        replaced = pass_on([net, env.container("web", networks=[net["name"]], command=["sleep", "3601"])])
        assert replaced["create_container"] == 1, replaced
        assert (replaced["containers"], replaced["networks"]) == (2, 1), replaced
        watcher.wait_for(lambda: present() and watcher.status()["converged"], what="still present")
    finally:
        agent.actual_client.stop()
