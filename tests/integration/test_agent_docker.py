"""The reconcile pass against the real Docker daemon: converge, repair, recreate, prune, safety."""

from __future__ import annotations

import contextlib
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import docker.errors
import pytest

from node_agent.docker_port import DockerPort
from node_agent.errors import DockerError
from node_agent.models import DIGEST, MANAGED, NODE
from node_agent.reconcile import NodeReconciler
from tests.support import agent_support as spec
from tests.support.agent_support import AgentEnv as Env
from tests.support.docker import TEST_LABEL
from tests.support.registry import Registry
from tests.support.services import free_port
from tests.support.waiting import wait_for


@pytest.fixture
def env(docker_client, busybox_image, docker_cleanup) -> Iterator[Env]:
    yield Env(docker_client, busybox_image, docker_cleanup)


def converge(env: Env, specs: list[dict[str, Any]], **kw: Any):
    result = env.reconciler().run_pass(spec.desired(specs, **kw))
    assert result.converged, result.errors
    return result


def test_converge_from_empty_then_nothing_to_do(env: Env):
    port = free_port()
    net = env.network("back")
    db = env.container("db", networks=[net["name"]])
    web = env.container(
        "web",
        command=["httpd", "-f", "-p", "8080"],
        ports=[{"host_ip": "127.0.0.1", "host_port": port, "container_port": 8080, "protocol": "tcp"}],
        networks=[net["name"]],
        depends_on=[db["name"]],
        env={"GREETING": "hi"},
        resources={"memory": 64 * 1024 * 1024},
    )
    result = converge(env, [net, db, web], with_manifest=True)
    assert [(a.op.value, a.target) for a in result.plan.actions] == [
        ("create_network", net["name"]),
        ("pull_image", env.image),
        ("create", db["name"]),
        ("create", web["name"]),
    ]
    c = env.get(web["name"])
    assert c.status == "running"
    assert c.labels[MANAGED] == "true" and c.labels[NODE] == env.node
    assert c.labels[DIGEST] == web["digest"]
    assert "GREETING=hi" in c.attrs["Config"]["Env"]
    assert c.attrs["HostConfig"]["Memory"] == 64 * 1024 * 1024
    assert net["name"] in c.attrs["NetworkSettings"]["Networks"]
    # the container runs, but httpd may not listen yet: wait until it answers
    assert wait_for(lambda: _http_status(port), f"busybox httpd answering on 127.0.0.1:{port}") == 404
    again = converge(env, [net, db, web], with_manifest=True)
    assert again.plan.actions == ()


def test_digest_change_recreates(env: Env):
    old = env.container("web")
    converge(env, [old])
    old_id = env.get(old["name"]).id
    new = env.container("web", command=["sleep", "3601"])
    result = converge(env, [new])
    assert [a.op.value for a in result.plan.actions] == ["pull_image", "recreate"]
    c = env.get(new["name"])
    assert c.id != old_id and c.labels[DIGEST] == new["digest"] and c.status == "running"


def test_prune_only_against_a_complete_manifest(env: Env):
    keep, drop = env.container("keep"), env.container("drop")
    converge(env, [keep, drop], with_manifest=True)
    converge(env, [keep])  # no manifest: unknown, nothing removed
    assert env.exists(drop["name"])
    other = env.container("other")
    converge(env, [keep], with_manifest=[keep, other])  # incomplete: nothing removed
    assert env.exists(drop["name"])
    result = converge(env, [keep], with_manifest=True)
    assert [(a.op.value, a.target) for a in result.plan.actions] == [("remove", drop["name"])]
    assert not env.exists(drop["name"]) and env.exists(keep["name"])


def test_unmanaged_container_with_the_same_name_is_untouched(env: Env):
    web = env.container("web")
    squatter = env.client.containers.run(
        env.image, ["sleep", "3600"], name=web["name"], detach=True, labels={TEST_LABEL: env.label}
    )
    result = env.reconciler().run_pass(spec.desired([web], with_manifest=True))
    assert not result.converged
    assert "does not manage" in result.errors[0] and web["name"] in result.errors[0]
    squatter.reload()
    assert squatter.status == "running" and MANAGED not in squatter.labels


def test_killed_container_is_started_and_removed_one_recreated(env: Env):
    web, api = env.container("web"), env.container("api")
    converge(env, [web, api])
    env.get(web["name"]).kill()
    env.client.api.remove_container(api["name"], force=True)
    result = converge(env, [web, api])
    assert sorted((a.op.value, a.target) for a in result.plan.actions) == [
        ("create", api["name"]),
        ("pull_image", env.image),
        ("start", web["name"]),
    ]
    assert env.get(web["name"]).status == "running"
    assert env.get(api["name"]).status == "running"


def test_another_nodes_containers_are_never_touched(env: Env):
    mine = env.container("web")
    converge(env, [mine], with_manifest=True)
    env.get(mine["name"]).kill()
    other = env.reconciler(node=f"{env.node}-b")
    result = other.run_pass(spec.desired([], with_manifest=True))  # complete and empty
    assert result.plan.actions == () and result.converged
    assert env.get(mine["name"]).status == "exited"  # node b neither removed nor started it


def test_one_failing_item_does_not_block_the_others(env: Env):
    good = env.container("good")
    bad = env.container("bad", image="phrame-test/absent:never")
    dependant = env.container("dep", depends_on=[bad["name"]])
    result = env.reconciler().run_pass(spec.desired([good, bad, dependant]))
    failed = {o.action.target: o.error for o in result.outcomes if not o.ok}
    assert set(failed) == {"phrame-test/absent:never", bad["name"], dependant["name"]}
    assert "dependency" in (failed[dependant["name"]] or "")
    assert env.get(good["name"]).status == "running"


def test_depends_on_waits_for_a_healthy_dependency(env: Env):
    db = env.container(
        "db",
        command=["sh", "-c", "sleep 1; touch /tmp/ready; sleep 3600"],
        healthcheck={"test": ["CMD", "test", "-f", "/tmp/ready"], "interval": "200ms", "retries": 20},
    )
    web = env.container("web", depends_on=[db["name"]])
    converge(env, [db, web])
    db_state = env.get(db["name"]).attrs["State"]
    web_started = docker_time(env.get(web["name"]).attrs["State"]["StartedAt"])
    assert db_state["Health"]["Status"] == "healthy"
    assert web_started > docker_time(db_state["StartedAt"])
    log = db_state["Health"]["Log"]
    assert any(entry["ExitCode"] == 0 and docker_time(entry["End"]) <= web_started for entry in log)


def docker_time(text: str) -> datetime:
    """Parse Docker's RFC 3339 time: nanoseconds (cut to microseconds), Z or an offset.

    Docker trims trailing zeros of the fraction, so its strings do not sort as times do.
    """
    match = re.fullmatch(r"(.+?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    assert match, f"not a Docker timestamp: {text!r}"
    base, fraction, zone = match.groups()
    micro = (fraction or "0")[:6].ljust(6, "0")
    return datetime.fromisoformat(f"{base}.{micro}{'+00:00' if zone == 'Z' else zone}")


def test_docker_time_compares_as_time_not_as_text():
    for early, late in (
        ("2026-01-01T10:00:01.5Z", "2026-01-01T10:00:01.50001Z"),
        ("2026-01-01T10:00:01Z", "2026-01-01T10:00:01.1Z"),
    ):
        assert early > late  # as text: wrong
        assert docker_time(early) < docker_time(late)
    assert docker_time("2026-01-01T12:00:00+02:00") == docker_time("2026-01-01T10:00:00Z")


def push_test_image(env: Env, registry: Registry) -> str:
    """Push the busybox test image to ``registry`` and drop it locally: ``<repo>:1``."""
    repo = f"{registry.url}/phrame-agent-{env.env}"
    env.client.images.get(env.image).tag(repo, "1")
    try:
        for line in env.client.api.push(
            repo, "1", auth_config=registry.auth_config, stream=True, decode=True
        ):
            assert "error" not in line, line
    finally:
        env.client.images.remove(f"{repo}:1")
    return repo


@pytest.mark.slow
def test_authenticated_pull_from_the_registry(env: Env, registry):
    repo = push_test_image(env, registry)
    web = env.container("web", image=f"{repo}:1")
    anonymous = env.reconciler().run_pass(spec.desired([web]))
    assert not anonymous.converged and not env.exists(web["name"])
    port = DockerPort(
        env.node, client=env.client, registry_auth=registry.auth_config, registry=registry.url, stop_timeout=1
    )
    try:
        result = NodeReconciler(env.node, port).run_pass(spec.desired([web]))
        assert result.converged, result.errors
        assert env.get(web["name"]).status == "running"
    finally:
        env.client.api.remove_container(web["name"], force=True)
        env.client.images.remove(f"{repo}:1", force=True)


@pytest.mark.slow
def test_credentials_are_not_sent_to_another_registry(env: Env, registry):
    # A second registry that would accept the same credentials: a pull from it succeeds only
    # if they are sent, so a failure proves they were not.
    with Registry(username=registry.username, password=registry.password) as other:
        repo = push_test_image(env, other)
        web = env.container("web", image=f"{repo}:1")

        def pass_with(registry_url: str):
            port = DockerPort(
                env.node,
                client=env.client,
                registry_auth=registry.auth_config,
                registry=registry_url,
                stop_timeout=1,
            )
            return NodeReconciler(env.node, port).run_pass(spec.desired([web]))

        try:
            refused = pass_with(registry.url)  # the credentials are for the first registry
            assert not refused.converged and not env.exists(web["name"])
            assert any("pull" in e for e in refused.errors), refused.errors
            assert pass_with(other.url).converged  # the same credentials, meant for it: pulled
        finally:
            if env.exists(web["name"]):
                env.client.api.remove_container(web["name"], force=True)
            with contextlib.suppress(docker.errors.ImageNotFound):
                env.client.images.remove(f"{repo}:1", force=True)


@pytest.mark.slow
def test_two_nodes_on_one_daemon_share_a_network_name(env: Env):
    """Tests run several agents on one daemon: `<env>.<net>` is one network for all."""
    net = env.network("shared")
    node_b = env.node + "-b"
    web = env.container("web", networks=[net["name"]])
    api = env.container("api", networks=[net["name"]])
    first = env.reconciler().run_pass(spec.desired([net, web], with_manifest=True))
    assert first.converged, first.errors
    for _ in range(2):  # node b: the network is present (no create, no 409), every pass
        second = env.reconciler(node_b).run_pass(spec.desired([net, api], with_manifest=True))
        assert second.converged, second.errors
        assert "create_network" not in [a.op.value for a in second.plan.actions]
    assert env.get(api["name"]).status == "running"
    # node b's complete manifest without the network: node a's network is never removed
    third = env.reconciler(node_b).run_pass(spec.desired([api], with_manifest=True))
    assert third.converged, third.errors
    assert [n.name for n in env.client.networks.list(names=[net["name"]])] == [net["name"]]
    assert env.client.networks.get(net["name"]).attrs["Labels"][NODE] == env.node


def test_a_crash_looping_dependency_is_not_ready(env: Env):
    """Docker reports such a container Running and Restarting between attempts: waiting for
    it must fail at once (its next die event brings a pass), never wait it out or catch it
    in one of its brief running moments and call it ready."""
    c = env.client.containers.run(
        env.image,
        ["sh", "-c", "exit 3"],
        detach=True,
        restart_policy={"Name": "always"},
        labels={TEST_LABEL: env.label},
    )
    port = DockerPort(env.node, client=env.client, stop_timeout=1)

    def restarts() -> int:
        c.reload()
        return int(c.attrs["RestartCount"])

    # its restart delay has grown past the start time
    wait_for(lambda: restarts() >= 3, "the container crash-looping", 30, interval=0.2, observe=restarts)
    said: list[str] = []

    def refused_while_restarting() -> bool:
        # a call may land in one of its running moments (long ones on a loaded machine): then
        # it returns, and the next call, 0.1 s later, lands elsewhere in the loop
        began = time.monotonic()
        try:
            port.wait_ready(c.name, timeout=3)
        except DockerError as e:
            said.append(str(e))
            assert time.monotonic() - began < 2, f"waited out a restarting container: {e}"
        return any(f"{c.name} is restarting" in e for e in said)

    wait_for(refused_while_restarting, "a wait that fails at once while it restarts", 20, interval=0.1)


def _http_status(port: int) -> int | None:
    """The HTTP status of ``/`` (busybox httpd answers 404: it is up), None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except (ConnectionError, urllib.error.URLError, TimeoutError):
        return None
