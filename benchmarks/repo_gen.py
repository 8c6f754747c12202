"""Generator of valid phrame-config repositories (docs/config/format.md) of any size, for the benchmark
and the property tests. Deterministic for a seed; writes only under the root it is given.

Valid by construction: names match stems, host ports are unique per node, ``depends_on``
points only at earlier services (no cycles), and each node's capacity is sized after
placement. It must never produce a repository that ``phrame.config_repo.validate`` rejects.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

ENVIRONMENTS = ("prod", "staging")
ROLES = ("edge", "core", "gpu")
NETWORKS = ("media", "control", "mgmt")
WORDS = ("ingest", "mixer", "encoder", "store", "proxy", "monitor", "router", "cache", "api", "worker")
CPUS = (0.1, 0.25, 0.5, 1, 2)
MEMORY_MI = (64, 128, 256, 512, 1024, 2048)
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./ -]*[A-Za-z0-9_./-]|[A-Za-z_/]")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict | list):  # only empty containers reach here
        return "{}" if isinstance(value, dict) else "[]"
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def _block(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    pairs = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for key, item in pairs:
        head = f"{pad}{_scalar(key)}:" if isinstance(value, dict) else f"{pad}-"
        if not isinstance(item, dict | list) or not item:
            lines.append(f"{head} {_scalar(item)}")
        elif isinstance(value, dict):
            lines.append(head)
            lines += _block(item, indent + 2)
        else:  # a collection inside a list starts on the dash's line
            sub = _block(item, indent + 2)
            lines.append(f"{head} {sub[0].lstrip()}")
            lines += sub[1:]
    return lines


def dump(path: str, data: Any, *, comment: str = "") -> str:
    """File text for ``data``: JSON for ``*.json``, block-style YAML otherwise."""
    if path.endswith(".json"):
        return json.dumps(data, indent=2) + "\n"
    head = f"# {comment}\n" if comment else ""
    return head + "\n".join(_block(data, 0)) + "\n"


def shuffled_keys(value: Any, rng: random.Random) -> Any:
    """``value`` with the keys of every mapping in a random order (list order kept)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled_keys(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled_keys(v, rng) for v in value]
    return value


class _Builder:
    def __init__(self, nodes: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nodes = [f"node-{i:03d}" for i in range(nodes)]
        self.role = {n: ROLES[i % len(ROLES)] for i, n in enumerate(self.nodes)}
        self.cordoned = {self.nodes[-1]} if nodes >= 4 else set()
        self.eligible = [n for n in self.nodes if n not in self.cordoned]
        self.ports: dict[str, set[tuple[int, str]]] = defaultdict(set)
        self.cpus: dict[str, float] = defaultdict(float)
        self.memory_mi: dict[str, int] = defaultdict(int)

    def free_port(self, nodes: list[str], proto: str) -> int:
        port = self.rng.randrange(10000, 50000)
        while any((port, proto) in self.ports[n] for n in nodes):
            port += 1
        for n in nodes:
            self.ports[n].add((port, proto))
        return port

    def service(self, env: str, name: str, earlier: list[str], pins: dict[str, str]) -> dict[str, Any]:
        rng = self.rng
        is_process = rng.random() < 0.05
        pinned = is_process or rng.random() < 0.5
        data: dict[str, Any] = {"name": name, "description": f"{name.split('-')[0]} in {env}"}
        if is_process:
            data["kind"] = "process"
            data["command"] = [f"/opt/{name}/bin/run", "--listen", f"127.0.0.1:{rng.randrange(2000, 9000)}"]
            data["workdir"] = f"/opt/{name}"
            data["user"] = "phrame"
        else:
            data["image"] = f"registry.example.test/{env}/{name.split('-')[0]}:{rng.randrange(1, 9)}.0"
            if rng.random() < 0.4:
                data["command"] = rng.choice([f"{name} --verbose", [name, "--config", "/etc/app.toml"]])
        data["env"] = {"LOG_LEVEL": rng.choice(["info", "debug"]), "WORKERS": rng.randrange(1, 9)}
        if rng.random() < 0.3:
            data["env"]["API_TOKEN"] = {"file": f"{name}.token"}
        if rng.random() < 0.2:
            data["env"]["FEATURE_FLAG"] = rng.random() < 0.5
        replicas = 1
        if pinned:
            node = rng.choice(self.eligible)
            data["placement"] = {"node": node}
            chosen = [node]
            if not is_process and rng.random() < 0.05:
                replicas, chosen = 2, [node, node]  # two replicas on one node: no host ports
        else:
            role = rng.choice(sorted({self.role[n] for n in self.eligible}))
            matching = [n for n in self.eligible if self.role[n] == role]
            spread = rng.random() < 0.5 and len(matching) > 1
            replicas = rng.randint(1, min(3, len(matching))) if spread else 1
            replicas = 0 if rng.random() < 0.02 else replicas
            chosen = rng.sample(matching, replicas)
            data["placement"] = {"labels": {"role": role}, **({"spread": True} if spread else {})}
        if replicas != 1:
            data["replicas"] = replicas
        if not is_process:
            self.container_extras(data, chosen, expose=len(set(chosen)) == len(chosen))
        if rng.random() < 0.8:
            cpus, mem = rng.choice(CPUS), rng.choice(MEMORY_MI)
            data["resources"] = {"cpus": cpus, "memory": f"{mem}Mi"}
            for n in chosen:
                self.cpus[n] += cpus
                self.memory_mi[n] += mem
        if earlier and rng.random() < 0.3:
            data["depends_on"] = rng.sample(earlier, rng.randint(1, min(3, len(earlier))))
        same_node = [s for s in earlier if pins.get(s) == chosen[0]] if is_process else []
        if same_node and rng.random() < 0.5:
            data["replaces"] = rng.choice(same_node)
        if pinned and not is_process and replicas == 1:
            pins[name] = chosen[0]
        data["_nodes"] = chosen
        return data

    def container_extras(self, data: dict[str, Any], nodes: list[str], *, expose: bool) -> None:
        rng = self.rng
        ports: list[Any] = [rng.choice([8080, "9090", "5000/udp"])] if rng.random() < 0.3 else []
        for _ in range(rng.randint(0, 2) if expose else 0):
            proto = "udp" if rng.random() < 0.15 else "tcp"
            port = self.free_port(nodes, proto)
            spec = f"127.0.0.1:{port}:{rng.choice([80, 8000, 9000])}"
            ports.append(spec + ("/udp" if proto == "udp" else ""))
        if ports:
            data["ports"] = ports
        if rng.random() < 0.4:
            data["volumes"] = [f"/srv/{data['name']}:/data", "/etc/phrame/common:/etc/common:ro"]
        nets = rng.sample(NETWORKS[:2], rng.randint(0, 2))
        if nets:
            data["networks"] = nets
        if rng.random() < 0.3:
            test = ["CMD", "wget", "-q", "-O-", "http://127.0.0.1:8000/healthz"]
            data["healthcheck"] = {"test": test, "interval": "10s", "timeout": "3s", "retries": 3}
        if rng.random() < 0.2:
            data["restart"] = rng.choice(["always", "on-failure"])
        data["labels"] = {"tier": rng.choice(["ingest", "production", "storage"]), "team": "broadcast"}


def repo_files(*, nodes: int, services: int, seed: int) -> dict[str, Any]:
    """Every file of the repository: repo-relative path → parsed content."""
    if nodes < 1 or services < 0:
        raise ValueError("need at least one node and a non-negative number of services")
    b = _Builder(nodes, seed)
    files: dict[str, Any] = {}
    for e, env in enumerate(ENVIRONMENTS):
        base = f"environments/{env}"
        files[f"{base}/environment.yaml"] = {
            "name": env,
            "description": f"{env} environment",
            "track": "main" if e == 0 else f"release/{env}",
            "placement": "auto" if e == 0 else "review",
            "defaults": {"restart": "unless-stopped", "labels": {"env": env}, "env": {"TZ": "UTC"}},
        }
        for n, net in enumerate(NETWORKS):
            files[f"{base}/networks/{net}.yaml"] = {
                "name": net,
                "driver": "bridge",
                "internal": net == "control",
                "subnet": f"10.{80 + e}.{n}.0/24",
                "labels": {"plane": net},
            }
        names = [f"{WORDS[i % len(WORDS)]}-{i:04d}" for i in range(e, services, len(ENVIRONMENTS))]
        assignments: dict[str, list[str]] = {}
        pins: dict[str, str] = {}
        for i, name in enumerate(names):
            data = b.service(env, name, names[:i], pins)
            chosen = data.pop("_nodes")
            if "labels" in data["placement"]:
                assignments[name] = chosen
            files[f"{base}/services/{name}.yaml"] = data
        files[f"{base}/node.json"] = {
            "schema": "phrame.placement/v1",
            "environment": env,
            "assignments": assignments,
            "reasons": {s: "generated by repo_gen" for s in assignments},
        }
    for node in b.nodes:
        files[f"nodes/{node}.yaml"] = {
            "name": node,
            "labels": {"role": b.role[node], "rack": f"r{b.nodes.index(node) // 8 + 1}", "site": "gen"},
            "capacity": {
                "cpus": math.ceil(b.cpus[node] * 1.25) + 2,
                "memory": f"{math.ceil(b.memory_mi[node] * 1.25 / 1024) + 4}Gi",
            },
            "cordoned": node in b.cordoned,
        }
    return dict(sorted(files.items()))


def write_repo(
    root: str | Path, *, nodes: int, services: int, seed: int, key_seed: int | None = None
) -> None:
    """Write the repository for (``nodes``, ``services``, ``seed``) under ``root``. With
    ``key_seed`` the keys of every mapping are written in a shuffled order."""
    key_rng = random.Random(key_seed) if key_seed is not None else None
    for path, data in repo_files(nodes=nodes, services=services, seed=seed).items():
        target = Path(root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = shuffled_keys(data, key_rng) if key_rng else data
        target.write_text(dump(path, content, comment=f"generated by repo_gen (seed {seed})"), "utf-8")
