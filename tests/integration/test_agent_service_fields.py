"""The compose fields of a container service on the real Docker daemon: the
agent creates the container with them, and a stop honours ``stop_signal`` and
``stop_grace_period`` instead of the agent's 10 s default (``PHRAME_STOP_TIMEOUT_S``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from node_agent.container_config import create_params
from node_agent.docker_port import DockerPort
from node_agent.models import STOP_TIMEOUT
from node_agent.reconcile import NodeReconciler
from tests.support import agent_support as spec
from tests.support.agent_support import AgentEnv as Env

AGENT_DEFAULT_STOP_S = 10  # the agent's own default, as in production
# a shell that ignores SIGTERM, as a badly written entrypoint does; INT ends it
IGNORES_TERM = ["sh", "-c", "trap '' TERM; trap 'exit 0' INT; while :; do sleep 0.2; done"]


def _reconciler(env: Env) -> NodeReconciler:
    port = DockerPort(env.node, client=env.client, stop_timeout=AGENT_DEFAULT_STOP_S)
    return NodeReconciler(env.node, port)


def _converge(reconciler: NodeReconciler, specs: list[dict[str, Any]]) -> float:
    started = time.monotonic()
    result = reconciler.run_pass(spec.desired(specs))
    assert result.converged, result.errors
    return time.monotonic() - started


def _replace_seconds(env: Env, **fields: Any) -> float:
    """Seconds the agent takes to replace a running container that ignores SIGTERM."""
    reconciler = _reconciler(env)
    old = env.container("web", command=IGNORES_TERM, **fields)
    _converge(reconciler, [old])
    assert env.get(old["name"]).status == "running"
    new = env.container("web", command=[*IGNORES_TERM[:2], IGNORES_TERM[2] + " # v2"], **fields)
    seconds = _converge(reconciler, [new])
    assert env.get(new["name"]).labels["io.phrame.digest"] == new["digest"]
    return seconds


@pytest.mark.slow
def test_stop_grace_period_shortens_the_replacement_of_a_process_ignoring_sigterm(env: Env) -> None:
    seconds = _replace_seconds(env, stop_grace_period="1s")
    assert seconds < 5, f"replacing took {seconds:.1f}s: the 1s grace was not used"


def test_stop_signal_reaches_the_process(env: Env) -> None:
    seconds = _replace_seconds(env, stop_signal="SIGINT")
    assert seconds < 5, f"replacing took {seconds:.1f}s: SIGINT was not sent"


def test_docker_inspect_shows_every_field(env: Env) -> None:
    web = env.container(
        "web",
        stop_signal="SIGQUIT",
        stop_grace_period="1500ms",
        user="1000:1000",
        working_dir="/srv/app",
        hostname="web-1",
        extra_hosts={"db.local": "10.0.0.5"},
        ulimits={"nofile": {"soft": 1024, "hard": 2048}, "core": {"soft": 0, "hard": 0}},
        logging={"driver": "json-file", "options": {"max-file": "2", "max-size": "1m"}},
    )
    _converge(_reconciler(env), [web])
    c = env.get(web["name"])
    config, host = c.attrs["Config"], c.attrs["HostConfig"]
    assert (config["StopSignal"], config["StopTimeout"]) == ("SIGQUIT", 2)  # rounded up
    assert (config["User"], config["WorkingDir"], config["Hostname"]) == ("1000:1000", "/srv/app", "web-1")
    assert host["ExtraHosts"] == ["db.local:10.0.0.5"]
    assert sorted(host["Ulimits"], key=lambda u: u["Name"]) == [
        {"Name": "core", "Soft": 0, "Hard": 0},
        {"Name": "nofile", "Soft": 1024, "Hard": 2048},
    ]
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-file": "2", "max-size": "1m"}}
    # and the process sees them: the limits of the service's own process (pid 1), not of an
    # exec'd shell, whose limits Docker does not always give the container's (once 2048 here)
    out = c.exec_run(["sh", "-c", "id -u; pwd; hostname; grep db.local /etc/hosts"]).output
    assert out.decode().split() == ["1000", "/srv/app", "web-1", "10.0.0.5", "db.local"]
    limits = c.exec_run(["cat", "/proc/1/limits"]).output.decode()
    nofile = next(line.split()[3:5] for line in limits.splitlines() if line.startswith("Max open files"))
    assert nofile == ["1024", "2048"], limits


def test_without_the_fields_docker_keeps_its_defaults_and_the_agent_its_stop_timeout(env: Env) -> None:
    """No StopTimeout is frozen into a container whose service sets no grace: the agent's
    own PHRAME_STOP_TIMEOUT_S (here 1 s) applies when it stops it, whatever it is then."""
    web = env.container("web", command=IGNORES_TERM)
    reconciler = NodeReconciler(env.node, DockerPort(env.node, client=env.client, stop_timeout=1))
    _converge(reconciler, [web])
    config = env.get(web["name"]).attrs["Config"]
    assert config.get("StopTimeout") is None and not config.get("StopSignal")
    assert config["User"] == "" and config["WorkingDir"] == ""
    new = env.container("web", command=[*IGNORES_TERM[:2], IGNORES_TERM[2] + " # v2"])
    seconds = _converge(reconciler, [new])
    assert seconds < 5, f"replacing took {seconds:.1f}s: the agent's 1 s was not used"


# ends at once on SIGTERM (a plain ``sleep`` as pid 1 ignores it and waits out the grace)
ENDS_ON_TERM = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"]


def _counting(env: Env) -> tuple[DockerPort, NodeReconciler]:
    port = DockerPort(env.node, client=env.client, stop_timeout=1)
    return port, NodeReconciler(env.node, port)


def test_a_replace_reads_the_stop_timeout_from_the_listed_label_not_an_inspect(env: Env) -> None:
    """The agent labels each container with its own StopTimeout ("" for none): a stop reads it
    from the list the pass began with, not from one inspect per stop."""
    port, reconciler = _counting(env)
    web = env.container("web", command=ENDS_ON_TERM, stop_grace_period="1500ms")
    plain = env.container("plain", command=ENDS_ON_TERM)
    _converge(reconciler, [web, plain])
    assert env.get(web["name"]).labels[STOP_TIMEOUT] == "2"  # rounded up, as StopTimeout
    assert env.get(plain["name"]).labels[STOP_TIMEOUT] == ""  # none of its own: the agent's
    port.calls.clear()
    changed = [
        env.container(s["service"], command=[*ENDS_ON_TERM[:2], ENDS_ON_TERM[2] + " # v2"])
        for s in (web, plain)
    ]
    _converge(reconciler, changed)
    assert port.calls["stop"] == 2 and port.calls["inspect_container"] == 0, port.calls


def test_a_container_listed_without_the_label_is_inspected_for_its_stop_timeout(env: Env) -> None:
    """A container an older agent created (no stop timeout label) is stopped with the
    StopTimeout an inspect finds, as before."""
    port, reconciler = _counting(env)
    web = env.container("web", command=ENDS_ON_TERM, stop_grace_period="1s")
    params = create_params(web, env.node)
    older = env.client.api.create_container(
        env.image,
        ENDS_ON_TERM,
        name=params.name,
        labels={k: v for k, v in params.labels.items() if k != STOP_TIMEOUT},
        stop_timeout=1,
    )
    env.client.api.start(older["Id"])
    port.calls.clear()
    new = env.container("web", command=[*ENDS_ON_TERM[:2], ENDS_ON_TERM[2] + " # v2"], stop_grace_period="1s")
    _converge(reconciler, [new])
    assert port.calls["stop"] == 1 and port.calls["inspect_container"] == 1, port.calls
    assert env.get(new["name"]).labels[STOP_TIMEOUT] == "1"


def test_a_dependency_the_list_shows_running_is_not_inspected_again(env: Env) -> None:
    """Replacing an item whose dependency runs (no healthcheck, or healthy) and is left alone
    by the pass asks Docker nothing more about the dependency: the pass's list said it."""
    port, reconciler = _counting(env)
    db = env.container("db", command=ENDS_ON_TERM)
    web = env.container("web", command=ENDS_ON_TERM, depends_on=[db["name"]])
    _converge(reconciler, [db, web])
    port.calls.clear()
    new = env.container(
        "web", command=[*ENDS_ON_TERM[:2], ENDS_ON_TERM[2] + " # v2"], depends_on=[db["name"]]
    )
    _converge(reconciler, [db, new])
    assert port.calls["stop"] == 1 and port.calls["inspect_container"] == 0, port.calls
