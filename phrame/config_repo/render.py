"""Rendering a valid repository into each node's desired state (docs/architecture/topics.md).

Pure: (repo, commit) → per-node items and manifests, and the declared services. The
``digest`` covers the spec alone; ``commit`` and ``generation`` come from
:func:`carry_forward`, so an unchanged item keeps its payload byte for byte across
commits. Only call on a repository that validated clean.
"""

from __future__ import annotations

import functools
import shlex
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phrame.config_repo.assignment import Replica, environment_replicas
from phrame.config_repo.cache import ReadCache
from phrame.config_repo.container_fields import container_fields
from phrame.config_repo.keys import inventory_key, per_environment, per_service
from phrame.config_repo.model import ConfigRepo, Environment
from phrame.config_repo.problems import ConfigError
from phrame.config_repo.quantities import memory_bytes, parse_ports
from phrame.config_repo.secrets import item_secrets
from schemas import Topics, canonical_json, digest

WORKTREE = "worktree"  # the commit named for a directory that is not read from git
DEFAULT_RESTART = "unless-stopped"


@dataclass
class NodeDesired:
    node: str
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # "containers/<id>" -> payload
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rendered:
    commit: str
    nodes: dict[str, NodeDesired]
    services: dict[tuple[str, str], dict[str, Any]]
    unassigned: list[str]  # item ids with no node yet
    # (node, "containers/<id>") -> the size of the item's canonical JSON (payload_size's check;
    # networks too)
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)

    def topics(self, topics: Topics | None = None) -> dict[str, dict[str, Any]]:
        """Every desired-plane topic and its payload (what config-sync publishes)."""
        t = topics or Topics()
        out: dict[str, dict[str, Any]] = {}
        for (env, svc), payload in sorted(self.services.items()):
            out[t.env_service(env, svc)] = payload
        for name in sorted(self.nodes):
            nd = self.nodes[name]
            for key in sorted(nd.items):
                out[_item_topic(t, name, key)] = nd.items[key]
            out[t.manifest(name)] = nd.manifest
        return out


@functools.lru_cache(maxsize=1 << 16)  # every rendering names the same items' topics again
def _item_topic(topics: Topics, node: str, key: str) -> str:
    kind, item_id = key.split("/", 1)
    return topics.desired_item(node, kind, item_id)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _argv(value: Any) -> list[str] | None:
    if value is None:
        return None
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _env(defaults: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    merged = {**defaults, **own}
    return {k: (dict(v) if isinstance(v, dict) else _text(v)) for k, v in sorted(merged.items())}


def _labels(defaults: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, str]:
    return {k: _text(v) for k, v in sorted({**defaults, **own}.items())}


def _healthcheck(hc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not hc:
        return None
    test = hc["test"]
    out = dict(hc)
    out["test"] = ["CMD-SHELL", test] if isinstance(test, str) else list(test)
    return out


def _resources(res: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    if "cpus" in res:
        out["nano_cpus"] = round(float(res["cpus"]) * 1e9)
    if "memory" in res:
        out["memory"] = memory_bytes(res["memory"])
    return out


class ReplicaIndex:
    """Item ids by (environment, service, node), built once per rendering: looking them up
    by scanning every replica for each dependency made a long ``depends_on`` chain quadratic."""

    def __init__(self, all_replicas: list[Replica]) -> None:
        self._ids: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
        for r in all_replicas:
            self._ids[(r.environment, r.service, r.node)].append(r.item_id)

    def same_node(self, env: str, service: str, node: str) -> list[str]:
        return list(self._ids.get((env, service, node), ()))


def _with_secrets(spec: dict[str, Any], env: Environment) -> dict[str, Any]:
    """``spec`` with its ``secrets`` (the ciphertext its env refers to) when it uses any:
    an item without them keeps its digest."""
    found = item_secrets(env, spec["env"])
    return {**spec, "secrets": found} if found else spec


def container_spec(rep: Replica, env: Environment, index: ReplicaIndex) -> dict[str, Any]:
    d = rep.spec
    defaults = env.doc.data.get("defaults", {}) if env.doc else {}
    assert rep.node is not None
    spec = {
        "kind": "container",
        "name": rep.item_id,
        "environment": rep.environment,
        "service": rep.service,
        "replica": rep.index,
        "image": d["image"],
        "pull": d.get("pull", "missing"),
        "command": _argv(d.get("command")),
        "entrypoint": _argv(d.get("entrypoint")),
        "env": _env(defaults.get("env", {}), d.get("env", {})),
        "ports": [m.to_spec() for p in d.get("ports", []) for m in parse_ports(p)],
        "volumes": list(d.get("volumes", [])),
        "networks": [f"{rep.environment}.{n}" for n in d.get("networks", [])],
        "resources": _resources(d.get("resources", {})),
        "healthcheck": _healthcheck(d.get("healthcheck")),
        "restart": d.get("restart", defaults.get("restart", DEFAULT_RESTART)),
        # ordering is local: only dependencies running on this same node can be waited for
        "depends_on": [
            i for dep in d.get("depends_on", []) for i in index.same_node(rep.environment, dep, rep.node)
        ],
        "labels": _labels(defaults.get("labels", {}), d.get("labels", {})),
        # only the ones set: an existing repository keeps its digests (container_fields)
        **container_fields(d, defaults),
    }
    return _with_secrets(spec, env)


def process_spec(rep: Replica, env: Environment, index: ReplicaIndex) -> dict[str, Any]:
    d = rep.spec
    defaults = env.doc.data.get("defaults", {}) if env.doc else {}
    assert rep.node is not None
    replaced = d.get("replaces")
    spec = {
        "kind": "process",
        "name": rep.item_id,
        "environment": rep.environment,
        "service": rep.service,
        "replica": rep.index,
        "command": list(d["command"]),
        "workdir": d.get("workdir"),
        "env": _env(defaults.get("env", {}), d.get("env", {})),
        "user": d.get("user"),
        "replaces": index.same_node(rep.environment, replaced, rep.node) if replaced else [],
        "depends_on": [
            i for dep in d.get("depends_on", []) for i in index.same_node(rep.environment, dep, rep.node)
        ],
    }
    return _with_secrets(spec, env)


def network_spec(env: Environment, name: str) -> dict[str, Any]:
    d = env.networks[name].data
    return {
        "kind": "network",
        "name": f"{env.name}.{name}",
        "environment": env.name,
        "network": name,
        "driver": d.get("driver", "bridge"),
        "internal": bool(d.get("internal", False)),
        "subnet": d.get("subnet"),
        "labels": _labels({}, d.get("labels", {})),
    }


def _environment_ids(env: Environment) -> tuple[Any, ...] | None:
    """What every item of ``env`` is made of besides its service: its environment file and
    SOPS files, by name and blob (None when one has no content id: nothing is cached)."""
    secrets = tuple(sorted(env.secrets))
    ids = [env.doc.content_id] if env.doc is not None else []
    ids += [env.secrets[k].content_id for k in secrets]
    if any(i is None for i in ids):
        return None
    return (env.name, env.doc is not None, secrets, *ids)


def _item_key(rep: Replica, env_ids: tuple[Any, ...] | None, index: ReplicaIndex) -> tuple[Any, ...] | None:
    """Everything a replica's item is made of, by content: its service file (blob sha), its
    environment's files (``env_ids``), the replica's place and the item ids its
    ``depends_on``/``replaces`` resolve to on its node. None when a file has no content id
    (not read from git): nothing is cached then."""
    if env_ids is None or rep.doc.content_id is None:
        return None
    d, node = rep.spec, rep.node
    assert node is not None
    deps = tuple(tuple(index.same_node(rep.environment, dep, node)) for dep in d.get("depends_on", ()))
    replaced = d.get("replaces")
    replaces = tuple(index.same_node(rep.environment, replaced, node)) if replaced else ()
    return ("item", env_ids, rep.doc.file, rep.doc.content_id, rep.index, node, deps, replaces)


def _item(
    rep: Replica,
    env: Environment,
    env_ids: tuple[Any, ...] | None,
    index: ReplicaIndex,
    cache: ReadCache | None,
) -> tuple[dict[str, Any], int]:
    """The replica's payload without its commit (spec and digest) and the size of its
    canonical JSON with a commit (what ``payload_size`` checks; a sha has 40 characters
    whatever the commit); with ``cache``, those made before from the same inputs."""
    key = _item_key(rep, env_ids, index) if cache is not None else None
    made = cache.get(key) if cache is not None and key is not None else None
    if made is None:
        make = process_spec if rep.spec.get("kind") == "process" else container_spec
        spec = make(rep, env, index)
        made = _stamped(spec)
        if cache is not None and key is not None:
            cache.put(key, made)
    return made


def _stamped(spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``spec`` with its digest, and the size of its canonical JSON with a commit (a sha has
    40 characters whatever the commit)."""
    stamped = {**spec, "digest": digest(spec)}
    return stamped, len(canonical_json({**stamped, "commit": "0" * 40}))


@dataclass(frozen=True)
class _EnvironmentItems:
    """What one environment renders to, without a commit: (node, key, payload, size) of
    each item and network, the item ids no node is assigned to, its declared services."""

    items: tuple[tuple[str, str, dict[str, Any], int], ...]
    unassigned: tuple[str, ...]
    services: tuple[tuple[tuple[str, str], dict[str, Any]], ...]


def _service_items(
    repo: ConfigRepo, env: Environment, names: set[str], cache: ReadCache | None
) -> dict[str, _ServiceItems]:
    """The items of the services ``names`` of ``env`` (their replicas, in order)."""
    env_replicas = environment_replicas(repo, env, cache=cache)
    index = ReplicaIndex(env_replicas)  # depends_on and replaces resolve within the environment
    env_ids = _environment_ids(env)
    items: dict[str, list[tuple[str, str, dict[str, Any], int]]] = defaultdict(list)
    unassigned: dict[str, list[str]] = defaultdict(list)
    networks: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for rep in env_replicas:
        if rep.service not in names:
            continue
        if rep.node is None:
            unassigned[rep.service].append(rep.item_id)
            continue
        key = f"{'processes' if rep.spec.get('kind') == 'process' else 'containers'}/{rep.item_id}"
        items[rep.service].append((rep.node, key, *_item(rep, env, env_ids, index, cache)))
        if key.startswith("containers/"):
            networks[rep.service][rep.node].update(rep.spec.get("networks", []))
    return {
        name: (
            tuple(items[name]),
            tuple(unassigned[name]),
            tuple((node, tuple(sorted(nets))) for node, nets in sorted(networks[name].items())),
        )
        for name in names
    }


def _placement_context(repo: ConfigRepo, env: Environment) -> tuple[Any, ...] | None:
    """What a service's items are made of besides its own file: the environment's files
    (:func:`_environment_ids`), its placement file, the inventory, and where every service
    of it runs (replicas, pin, kind: what ``depends_on`` and ``replaces`` resolve to). None
    when a file has no content id."""
    env_ids = _environment_ids(env)
    nodes = inventory_key(repo)
    placement = env.placement
    if env_ids is None or nodes is None or (placement is not None and placement.content_id is None):
        return None
    where = []
    for name, doc in sorted(env.services.items()):
        data = doc.data if isinstance(doc.data, dict) else {}
        pin = data.get("placement", {}).get("node") if isinstance(data.get("placement"), dict) else None
        where.append((name, doc.schema_ok, data.get("replicas", 1), pin, data.get("kind", "container")))
    placed = None if placement is None else (placement.file, placement.content_id)
    return (env_ids, nodes, placed, tuple(where))


# a service's items: (node, key, payload without commit, size) each, its unassigned item ids
# and, per node, the networks its containers join
_ServiceItems = tuple[
    tuple[tuple[str, str, dict[str, Any], int], ...], tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]
]


def _environment_items(repo: ConfigRepo, env: Environment, cache: ReadCache | None) -> _EnvironmentItems:
    """What ``env`` renders to. With ``cache``, a service's items are kept by its file while
    the rest they are made of is unchanged (:func:`_placement_context`)."""
    context = _placement_context(repo, env) if cache is not None else None
    made = per_service(
        cache, "service-items", context, env, lambda names: _service_items(repo, env, names, cache)
    )
    items: list[tuple[str, str, dict[str, Any], int]] = []
    unassigned: list[str] = []
    used_networks: dict[str, set[str]] = defaultdict(set)
    for name in sorted(env.services):
        service_items, service_unassigned, networks = made[name]
        items += service_items
        unassigned += service_unassigned
        for node, joined in networks:
            used_networks[node].update(joined)
    stamped_networks: dict[str, tuple[dict[str, Any], int]] = {}
    for node, nets in sorted(used_networks.items()):
        for net in sorted(nets):
            if net not in stamped_networks:
                stamped_networks[net] = _stamped(network_spec(env, net))
            items.append((node, f"networks/{env.name}.{net}", *stamped_networks[net]))
    services = tuple(
        (
            (env.name, name),
            {
                "name": name,
                "environment": env.name,
                "kind": doc.data.get("kind", "container"),
                "file": doc.file,
                "declared": doc.data,
            },
        )
        for name, doc in sorted(env.services.items())
    )
    return _EnvironmentItems(tuple(items), tuple(unassigned), services)


def render(repo: ConfigRepo, *, commit: str | None = None) -> Rendered:
    """Each inventory node's items and manifest at ``commit`` (generation 1 everywhere;
    :func:`carry_forward` continues an earlier rendering's generations and commits)."""
    if repo.problems is None:
        raise ConfigError("render() needs a repository that validate() has checked")
    if repo.problems:
        raise ConfigError(f"cannot render an invalid repository: {repo.problems[0].format()}")
    sha = commit or repo.commit or WORKTREE
    if repo.rendered is not None and repo.rendered[0] == sha:
        done: Rendered = repo.rendered[1]  # validate rendered it (payload sizes): the same repository
        return done
    return render_checked(repo, sha)


def render_checked(repo: ConfigRepo, sha: str, cache: ReadCache | None = None) -> Rendered:
    """:func:`render` of a repository whose schemas and rules passed; ``validate`` calls it
    before it has finished (to measure payloads), so it does not look at ``repo.problems``.
    With ``cache`` (``validate``'s), an environment whose files and the inventory are the
    blobs rendered before is not rendered again, and in one that changed an item whose
    inputs are unchanged is not rendered nor digested again: equal by construction
    (tested against a rendering without it). Each payload gets ``sha`` as its commit."""
    nodes = {n: NodeDesired(n) for n in sorted(repo.nodes)}
    unassigned: list[str] = []
    sizes: dict[tuple[str, str], int] = {}
    services: dict[tuple[str, str], dict[str, Any]] = {}
    sha_size = len(canonical_json(sha)) - 2  # items are measured with a sha of 40 characters
    for env_name in sorted(repo.environments):
        env = repo.environments[env_name]
        made = per_environment(
            cache, "environment-items", repo, env, lambda e: _environment_items(repo, e, cache)
        )
        for node, key, payload, size in made.items:
            nodes[node].items[key] = {**payload, "commit": sha}
            sizes[(node, key)] = size + sha_size - 40
        unassigned += made.unassigned
        services.update(made.services)
    for nd in nodes.values():
        nd.items = dict(sorted(nd.items.items()))
        nd.manifest = {
            "generation": 1,
            "commit": sha,
            "items": {k: v["digest"] for k, v in nd.items.items()},
        }
    return Rendered(sha, nodes, services, unassigned, sizes)


def carry_forward(
    new: Mapping[str, dict[str, Any]], previous: Mapping[str, dict[str, Any]], topics: Topics
) -> dict[str, dict[str, Any]]:
    """Topic payloads of ``new`` adjusted against the ``previous`` publication: an item
    whose digest is unchanged keeps its old payload (and commit); a manifest keeps its
    generation and commit when its items are unchanged, else takes generation + 1. A
    payload without a digest (a declared service) keeps its old one when each of its fields
    is the very value the old one holds (config-sync's read cache shares a parsed file
    between readings): equal bytes without encoding either."""
    out: dict[str, dict[str, Any]] = {}
    manifests: list[str] = []
    for topic, payload in new.items():
        if topic.endswith("/manifest") and topics.parse(topic).kind == "manifest":
            manifests.append(topic)  # after the items, as they depend on them
            continue
        old = previous.get(topic)
        if old is not None and (old is payload or _unchanged(old, payload)):
            out[topic] = old
        else:
            out[topic] = payload
    for topic in manifests:
        payload = new[topic]
        old = previous.get(topic)
        if old is not None and (old is payload or old.get("items") == payload["items"]):
            out[topic] = old
        else:
            generation = int(old.get("generation", 0)) + 1 if old else payload["generation"]
            out[topic] = {**payload, "generation": generation}
    return out


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    if "digest" in new:
        return bool(old.get("digest") == new["digest"])
    return _same_fields(old, new)


def _same_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Each field of ``new`` is the very object in ``old`` (or an equal string): strict, as
    ``==`` is not (``1 == 1.0 == True``, whose JSON differ)."""
    if old.keys() != new.keys():
        return False
    for key, value in new.items():
        was = old[key]
        if was is not value and not (type(was) is str and type(value) is str and was == value):
            return False
    return True
