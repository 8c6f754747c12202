"""Benchmark: a staged rollout to a new image over a slow registry link, pulled ahead vs in the wave.

Real parts: mosquitto, config-sync on a git remote, four ``phrame node-agent`` processes on
the one Docker daemon, Debian's docker-registry behind a TCP proxy throttled to
``BENCH_LINK_BYTES_S`` (a slow edge link). Two environments of one service each (2 replicas
in one wave, ``max_parallel: 2``): ``inwave``'s agents run with ``PHRAME_PULL_AHEAD=0``
(today's wave: its replace includes the pull; the baseline, same run) and ``ahead``'s with
the default (the nodes pull first, the wave waits for ``pulled``). Each round pushes a new
image per environment (a fresh random layer of ``BENCH_LAYER_MB``) and commits both. A
wave's time: from its release (the retained rollout state) to the last of its new
containers started. Also the commit → complete time of each (pulling ahead moves the pull
before the wave; it does not make the rollout as a whole shorter), and Docker's own replace
(stop + remove + create + start of one container, image present; same run): what a wave
pulled ahead should come close to. Target: a wave pulled ahead takes at most 0.75 of one that
pulls (``wave_ratio``; on a slow link the pull is most of a wave). Prints one JSON object;
removes what it created. Exit 0 whenever it measured, 2 without Docker, mosquitto or
docker-registry.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config_sync.reporting import LocalReporter  # noqa: E402
from config_sync.service import ConfigSync  # noqa: E402
from phrame.mqtt import MqttError  # noqa: E402
from schemas import Topics  # noqa: E402
from schemas.container_exits import docker_time  # noqa: E402
from tests.support import docker as docker_support  # noqa: E402
from tests.support.agent_support import AgentProcess, open_policy_file  # noqa: E402
from tests.support.mosquitto import Mosquitto  # noqa: E402
from tests.support.registry import Registry  # noqa: E402
from tests.support.sync_support import ConfigRemote, desired_on_broker, reader, settings_for  # noqa: E402
from tests.support.tcp_proxy import PartitionProxy  # noqa: E402

ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "2")))
LAYER_MB = max(1, int(os.environ.get("BENCH_LAYER_MB", "8")))
LINK_BYTES_S = float(os.environ.get("BENCH_LINK_BYTES_S", str(2 * 1024 * 1024)))
LOOP = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"
TAG = uuid.uuid4().hex[:6]
ENVS = {"inwave": "0", "ahead": "1"}  # environment -> PHRAME_PULL_AHEAD of its nodes
T = Topics()

TARGET_WAVE_RATIO = 0.75

FIGURES = [
    {
        "name": "rollout to a new image: wave pulled ahead / wave that pulls (medians)",
        "value": "wave_ratio",
        "unit": "×",
        "baseline": None,
        "target": "target_wave_ratio",
        "op": "<=",
    },
    {
        "name": "rollout to a new image: time per wave, image pulled ahead (slow link; median)",
        "value": "ahead.wave_s.median",
        "unit": "s",
        "baseline": "inwave.wave_s.median",
        "target": None,
    },
    {
        "name": "rollout to a new image: time per wave pulled ahead vs Docker's bare replace (median)",
        "value": "ahead.wave_s.median",
        "unit": "s",
        "baseline": "docker_replace_s.median",
        "target": None,
    },
    {
        "name": "rollout to a new image: commit → complete, pulled ahead (median)",
        "value": "ahead.rollout_s.median",
        "unit": "s",
        "baseline": "inwave.rollout_s.median",
        "target": None,
    },
]


def say(text: str) -> None:
    print(f"rollout_new_image: {text}", file=sys.stderr, flush=True)


def nodes_of(env: str) -> list[str]:
    return [f"b{TAG}{env[:2]}{i}" for i in range(2)]


def files(repo: str, tags: dict[str, str]) -> dict[str, str]:
    out = {}
    for env, tag in tags.items():
        for n in nodes_of(env):
            out[f"nodes/{n}.yaml"] = f"name: {n}\nlabels:\n  pool: {env}\n"
        out[f"environments/{env}/environment.yaml"] = f"name: {env}\n"
        out[f"environments/{env}/node.json"] = json.dumps(
            {"schema": "phrame.placement/v1", "environment": env, "assignments": {"web": nodes_of(env)}}
        )
        out[f"environments/{env}/services/web.yaml"] = (
            f'name: web\nimage: {repo}-{env}:{tag}\ncommand: [sh, -c, "{LOOP}"]\nreplicas: 2\n'
            f"placement:\n  labels:\n    pool: {env}\n"
            "update:\n  max_parallel: 2\n  min_healthy_s: 0\n  healthy_deadline_s: 600\n"
        )
    return out


def push_image(client: Any, base: str, registry: Registry, name: str, tag: str) -> None:
    """``name:tag`` in the registry: ``base`` plus a fresh random layer; nothing stays local."""
    c = client.containers.create(
        base,
        command=["sh", "-c", f"dd if=/dev/urandom of=/blob bs=1048576 count={LAYER_MB} 2>/dev/null"],
        labels=docker_support.labels(f"bench-{TAG}"),
    )
    try:
        c.start()
        c.wait(timeout=120)
        repo = f"{registry.url}/{name}"
        c.commit(repository=repo, tag=tag)
    finally:
        c.remove(force=True)
    try:
        for line in client.api.push(repo, tag, auth_config=registry.auth_config, stream=True, decode=True):
            if "error" in line:
                raise RuntimeError(f"push {repo}:{tag}: {line['error']}")
    finally:
        client.images.remove(f"{repo}:{tag}")


def bare_replace(client: Any, image: str) -> float:
    """Docker alone: stop and remove a running container, create and start its successor."""

    def make() -> Any:
        c = client.containers.create(
            image, command=["sh", "-c", LOOP], labels=docker_support.labels(f"bench-{TAG}")
        )
        c.start()
        return c

    old = make()
    started = time.monotonic()
    old.stop(timeout=2)
    old.remove()
    new = make()
    took = time.monotonic() - started
    new.remove(force=True)
    return took


def rollout(watch: Any, env: str) -> dict[str, Any]:
    try:
        raw = desired_on_broker(watch).get(T.env_rollout(env, "web"))
    except MqttError:  # the plane kept changing for the whole read (a loaded host): read again
        return {}
    return json.loads(raw) if raw else {}


def wait(condition: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:g} s")


def main() -> int:
    client = docker_support.try_docker_client()
    have = shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists()
    if client is None or not have or not shutil.which("docker-registry"):
        print(
            json.dumps({"benchmark": "rollout_new_image", "error": "no Docker, mosquitto or docker-registry"})
        )
        return 2
    root = Path(tempfile.mkdtemp(prefix="phrame-bench-newimage-"))
    base = docker_support.busybox_image(client)
    name = f"phrame-bench-{TAG}"
    results: dict[str, dict[str, list[float]]] = {e: {"wave_s": [], "rollout_s": []} for e in ENVS}
    bare: list[float] = []
    agents: list[AgentProcess] = []
    with contextlib.ExitStack() as stack:
        registry = stack.enter_context(Registry())
        proxy = PartitionProxy(registry.port, rate_bytes_s=LINK_BYTES_S)
        stack.callback(proxy.close)
        broker = Mosquitto().start()
        stack.callback(broker.stop)
        repo = f"127.0.0.1:{proxy.port}/{name}"
        stack.callback(shutil.rmtree, root, True)

        def cleanup() -> None:
            for agent in agents:
                try:
                    agent.terminate()
                except Exception:  # a hung one: killed by its pid, never by name
                    agent.proc.kill()
            for env in ENVS:
                for n in nodes_of(env):
                    for c in client.containers.list(all=True, filters={"label": f"io.phrame.node={n}"}):
                        c.remove(force=True)
                for image in client.images.list(name=f"{repo}-{env}"):
                    for t in image.tags:
                        with contextlib.suppress(Exception):
                            client.images.remove(t)
            docker_support.cleanup(client, f"bench-{TAG}")

        stack.callback(cleanup)
        say(f"pushing the first images ({LAYER_MB} MB layers; link {LINK_BYTES_S / 1e6:.1f} MB/s)")
        for env in ENVS:
            push_image(client, base, registry, f"{name}-{env}", "0")
        remote = ConfigRemote(root)
        remote.commit("v0", files=files(repo, dict.fromkeys(ENVS, "0")))
        service = ConfigSync(
            settings_for(remote, root / "sync", broker.url, poll_s=3600, debounce_s=0, deploy_timeout_s=600),
            reporter=LocalReporter(),
        )
        service.start()
        stack.callback(service.stop)
        for env, ahead in ENVS.items():
            for n in nodes_of(env):
                state = root / f"agent-{n}"
                state.mkdir()
                environ = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
                environ |= {
                    "PYTHONPATH": str(ROOT),
                    "PHRAME_NODE_NAME": n,
                    "PHRAME_STATE_DIR": str(state / "state"),
                    "PHRAME_DESIRED_MQTT_URL": broker.url,
                    "PHRAME_SHARED_DAEMON": "1",
                    "PHRAME_STOP_TIMEOUT_S": "2",
                    "PHRAME_RESYNC_S": "5",
                    "PHRAME_PULL_AHEAD": ahead,
                    "PHRAME_POLICY_FILE": open_policy_file(state),
                    "PHRAME_REGISTRY_URL": f"127.0.0.1:{proxy.port}",
                    "PHRAME_REGISTRY_USERNAME": registry.username,
                    "PHRAME_REGISTRY_PASSWORD": registry.password,
                }
                agents.append(AgentProcess(environ, str(root / f"agent-{n}.log")))
        with reader(broker.url, f"bench-{TAG}") as watch:

            def running(env: str, tag: str) -> bool:
                found = [
                    c
                    for n in nodes_of(env)
                    for c in client.containers.list(filters={"label": f"io.phrame.node={n}"})
                ]
                return len(found) == 2 and all(c.attrs["Config"]["Image"].endswith(f":{tag}") for c in found)

            say("waiting for the first replicas")
            wait(lambda: all(running(e, "0") for e in ENVS), "the first replicas running", 300)
            for r in range(1, ROUNDS + 1):
                say(f"round {r}/{ROUNDS}: pushing new images")
                for env in ENVS:
                    push_image(client, base, registry, f"{name}-{env}", str(r))
                sha = remote.commit(f"round {r}", files=files(repo, dict.fromkeys(ENVS, str(r))))
                committed = time.time()
                service.trigger_sync("main")

                def done(env: str, sha: str = sha) -> bool:
                    doc = rollout(watch, env)
                    return doc.get("commit") == sha and doc.get("state") == "complete"

                wait(lambda: all(done(e) for e in ENVS), f"round {r}'s rollouts to complete", 600)
                for env in ENVS:
                    doc = rollout(watch, env)
                    released = min(x["released_at"] for x in doc["replicas"])
                    started = [
                        docker_time(c.attrs["State"]["StartedAt"])
                        for n in nodes_of(env)
                        for c in client.containers.list(filters={"label": f"io.phrame.node={n}"})
                    ]
                    results[env]["wave_s"].append(max(started) - released)
                    results[env]["rollout_s"].append(doc["updated_at"] - committed)
                    say(f"round {r} {env}: wave {results[env]['wave_s'][-1]:.2f} s")
                bare += [bare_replace(client, base) for _ in range(2)]

    out: dict[str, Any] = {
        "benchmark": "rollout_new_image",
        "rounds": ROUNDS,
        "layer_mb": LAYER_MB,
        "link_bytes_s": LINK_BYTES_S,
    }
    for env, series in results.items():
        out[env] = {
            key: {"median": round(statistics.median(v), 3), "all": [round(x, 3) for x in v]}
            for key, v in series.items()
        }
    out["docker_replace_s"] = {
        "median": round(statistics.median(bare), 3),
        "all": [round(b, 3) for b in bare],
    }
    out["wave_ratio"] = round(out["ahead"]["wave_s"]["median"] / out["inwave"]["wave_s"]["median"], 3)
    out["target_wave_ratio"] = TARGET_WAVE_RATIO
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
