"""Semantic rules that span files (docs/cli.md, phrame validate), run after the schemas.

Each rule reads only the parts of a document that passed the schema (``is_sound``), so it
can trust their shape while a typo elsewhere in the same file is reported beside it; names
of files that failed the schema still count as existing, so one bad file is not reported
again as a dangling reference everywhere. Each problem points at the value that breaks the rule.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from phrame.config_repo.assignment import Replica, environment_replicas
from phrame.config_repo.cache import ReadCache
from phrame.config_repo.freeze import FreezeError, instant, parse_cron, zone_of
from phrame.config_repo.image_policy import image_policy_problems
from phrame.config_repo.keys import inventory_key, per_environment, per_service
from phrame.config_repo.model import ConfigRepo, Document, Environment, PathPart
from phrame.config_repo.preview_rules import preview_problems
from phrame.config_repo.problems import Problem
from phrame.config_repo.quantities import PortMapping, format_bytes, memory_bytes, parse_ports
from phrame.config_repo.secrets import secret_file_problems, service_secret_problems
from phrame.config_repo.update_policy import dedupe_update_problems, service_update_problems
from schemas.registry import pointer

# One service's ports expand to at most this many mappings ("1-65535" would be 65,535
# published ports, checked and rendered one by one on every push).
MAX_PORTS_PER_SERVICE = 1024
_ANY_ADDRESS = (None, "0.0.0.0", "::")


def at(doc: Document, path: list[PathPart], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))


def _valid(docs: dict[str, Document]) -> Iterator[tuple[str, Document]]:
    """Documents that are mappings: each rule then checks the parts it reads."""
    for name in sorted(docs):
        if isinstance(docs[name].data, dict):
            yield name, docs[name]


def _sound_items(doc: Document, key: str) -> list[tuple[int, Any]]:
    """The well-formed entries of the list at ``key`` (none when it is not a list)."""
    value = doc.data.get(key, [])
    if not isinstance(value, list):
        return []
    return [(i, v) for i, v in enumerate(value) if doc.is_sound(key, i)]


def node_names(repo: ConfigRepo) -> Iterator[Problem]:
    """Each node file's ``name`` is its file name."""
    yield from _table_names(repo.nodes)


def _table_names(table: dict[str, Document]) -> Iterator[Problem]:
    for stem, named in _valid(table):
        yield from _file_name(stem, named)


def _file_name(stem: str, named: Document) -> Iterator[Problem]:
    if isinstance(named.data, dict) and named.is_sound("name") and named.data["name"] != stem:
        msg = f"name {named.data['name']!r} must equal the file name {stem!r}"
        yield at(named, ["name"], "name-mismatch", msg)


def environment_names(env: Environment) -> Iterator[Problem]:
    """An environment's networks named as their files, and itself as its folder."""
    yield from _table_names(env.networks)
    pairs: list[tuple[Document | None, str]] = [(env.doc, "name"), (env.placement, "environment")]
    for doc, key in pairs:
        if doc is not None and doc.is_sound(key) and doc.data[key] != env.name:
            msg = f"{key} {doc.data[key]!r} must equal the folder name {env.name!r}"
            yield at(doc, [key], "name-mismatch", msg)


def environment_settings(repo: ConfigRepo) -> Iterator[Problem]:
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not (doc.is_sound("track") and doc.is_sound("placement")):
            continue
        track = doc.data.get("track", "main")
        if track.startswith("refs/tags/") and doc.data.get("placement", "auto") == "auto":
            msg = (
                "an environment that tracks a tag can only use placement: review "
                "(placement never writes to a tag)"
            )
            yield at(doc, ["track"], "tag-auto-placement", msg)


def notify_targets(repo: ConfigRepo) -> Iterator[Problem]:
    """Each ``notify:`` target's name is unique in its environment (logs and metrics name it)."""
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not isinstance(doc.data, dict):
            continue
        seen: dict[str, int] = {}
        for i, target in _sound_items(doc, "notify"):
            name = target["name"]
            if name in seen:
                msg = f"notify target {name!r} is also entry {seen[name] + 1}; give each target its own name"
                yield at(doc, ["notify", i, "name"], "notify-duplicate", msg)
            else:
                seen[name] = i


def freeze_windows(repo: ConfigRepo) -> Iterator[Problem]:
    """Each ``freeze:`` window reads: its cron parses, its time zone is a known IANA zone,
    ``from`` and ``to`` are RFC 3339 and ``from`` comes first."""
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not isinstance(doc.data, dict):
            continue
        for i, window in _sound_items(doc, "freeze"):
            checks: list[tuple[str, str, Any]] = []
            if "cron" in window:
                checks = [("cron", "freeze-cron", parse_cron), ("timezone", "freeze-timezone", zone_of)]
            else:
                checks = [("from", "freeze-window", instant), ("to", "freeze-window", instant)]
            failed = False
            for key, rule, check in checks:
                if key not in window:
                    continue
                try:
                    check(window[key])
                except FreezeError as e:
                    failed = True
                    yield at(doc, ["freeze", i, key], rule, f"freeze entry {i + 1}: {e}")
            if not failed and "from" in window and instant(window["from"]) >= instant(window["to"]):
                msg = f"freeze entry {i + 1}: from {window['from']} must be before to {window['to']}"
                yield at(doc, ["freeze", i, "from"], "freeze-window", msg)


def service_references(repo: ConfigRepo, env: Environment, doc: Document) -> Iterator[Problem]:
    """What one service names: its pinned node, networks, dependencies and the container it replaces."""
    if not isinstance(doc.data, dict):
        return
    data = doc.data
    pin = data.get("placement", {}).get("node") if doc.is_sound("placement") else None
    if pin is not None:
        node = repo.nodes.get(pin)
        if node is None:
            yield at(doc, ["placement", "node"], "unknown-node", f"node {pin!r} is not in nodes/")
        elif node.is_sound("cordoned") and node.data.get("cordoned"):
            msg = f"node {pin!r} is cordoned; pin the service elsewhere or uncordon the node"
            yield at(doc, ["placement", "node"], "cordoned-node", msg)
    for i, net in _sound_items(doc, "networks"):
        if net not in env.networks:
            msg = f"network {net!r} is not declared in {env.dir}/networks/"
            yield at(doc, ["networks", i], "unknown-network", msg)
    for i, dep in _sound_items(doc, "depends_on"):
        if dep not in env.services:
            msg = f"depends_on {dep!r}: no such service in {env.dir}/services/"
            yield at(doc, ["depends_on", i], "unknown-dependency", msg)
    target = data.get("replaces") if doc.is_sound("replaces") else None
    if target is not None:
        other = env.services.get(target)
        if other is None:
            msg = f"replaces {target!r}: no such service in {env.dir}/services/"
            yield at(doc, ["replaces"], "replaces-unknown", msg)
        elif _is_process(other):
            msg = f"replaces {target!r}: that service is a process; only a container is replaced"
            yield at(doc, ["replaces"], "replaces-unknown", msg)


def _is_process(doc: Document) -> bool:
    return doc.is_sound("kind") and doc.data.get("kind", "container") != "container"


def replacements(repo: ConfigRepo, all_replicas: list[Replica]) -> Iterator[Problem]:
    """``replaces`` names a container on the same node: the agent removes only a replica
    running beside the process, so a target on other nodes would silently stay up."""
    nodes: dict[tuple[str, str], list[str | None]] = defaultdict(list)
    for rep in all_replicas:
        nodes[(rep.environment, rep.service)].append(rep.node)
    for env in repo.environments.values():
        for name, doc in _valid(env.services):
            target = doc.data.get("replaces") if doc.is_sound("replaces") else None
            other = env.services.get(target) if target is not None else None
            if target is None or other is None or not other.is_sound("kind") or _is_process(other):
                continue  # no such container: replaces-unknown says so
            placed = nodes[(env.name, target)]
            theirs = {n for n in placed if n is not None}
            if not placed or None in placed:
                continue  # not running, or not yet placed: placement may still put it beside us
            lonely = sorted({n for n in nodes[(env.name, name)] if n is not None} - theirs)
            if lonely:
                msg = (
                    f"replaces {target!r}: this process runs on {', '.join(lonely)} but {target!r} "
                    f"runs on {', '.join(sorted(theirs))}; replaces names a container on the same node"
                )
                yield at(doc, ["replaces"], "replaces-other-node", msg)


def cycles(env: Environment) -> Iterator[Problem]:
    graph = {
        n: [d for _, d in _sound_items(doc, "depends_on") if d in env.services]
        for n, doc in _valid(env.services)
    }
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    reported: set[frozenset[str]] = set()
    # depth-first without recursion: a chain of a thousand services must not exhaust the stack
    for root in sorted(graph):
        if root in state:
            continue
        state[root] = 1
        stack, pending = [root], [iter(graph[root])]
        while stack:
            node = stack[-1]
            dep = next(pending[-1], None)
            if dep is None:
                stack.pop()
                pending.pop()
                state[node] = 2
            elif state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                if frozenset(cycle) not in reported:
                    reported.add(frozenset(cycle))
                    doc = env.services[node]
                    i = doc.data["depends_on"].index(dep)
                    msg = "dependency cycle: " + " → ".join(cycle)
                    yield at(doc, ["depends_on", i], "dependency-cycle", msg)
            elif dep not in state:
                state[dep] = 1
                stack.append(dep)
                pending.append(iter(graph.get(dep, [])))


@functools.lru_cache(maxsize=65536, typed=True)
def _port_count(spec: str | int) -> int:
    """How many mappings ``spec`` expands to, without expanding it (0: parse_ports says why)."""
    container = str(spec).partition("/")[0].rpartition(":")[2]
    lo, _, hi = container.partition("-")
    try:
        return max(int(hi or lo) - int(lo) + 1, 0)
    except ValueError:
        return 0


# a service's port problems and its mappings that publish a host port
_Published = tuple[list[Problem], list[tuple[int, PortMapping]]]


def _published(doc: Document) -> _Published:
    """A service's problems with its port specs (syntax, too many) and its mappings that
    publish a host port, with their spec index: read once, whatever its replica count."""
    problems: list[Problem] = []
    published: list[tuple[int, PortMapping]] = []
    total = 0
    for i, spec in _sound_items(doc, "ports"):
        count = _port_count(spec)
        total += count
        if total > MAX_PORTS_PER_SERVICE:
            msg = f"port spec {spec!r} expands to {count} ports"
            msg += f" ({total} in this service)" if total != count else ""
            msg += f"; a service may publish at most {MAX_PORTS_PER_SERVICE}"
            # not checked for conflicts: the service must change anyway
            return [*problems, at(doc, ["ports", i], "too-many-ports", msg)], []
        try:
            published += [(i, m) for m in parse_ports(spec) if m.host_port is not None]
        except ValueError as e:
            problems.append(at(doc, ["ports", i], "port-syntax", str(e)))
    return problems, published


def _published_once(doc: Document, cache: ReadCache | None) -> _Published:
    """:func:`_published` of ``doc``, from ``cache`` when a file of that path and content
    was read before (the result is a function of the file alone: its schema's verdict too)."""
    if cache is None or doc.content_id is None:
        return _published(doc)
    key = ("ports", doc.file, doc.content_id)
    made = cache.get(key)
    if made is None:
        made = _published(doc)
        cache.put(key, made)
    return made


def port_specs(
    env: Environment, cache: ReadCache | None = None
) -> tuple[list[Problem], dict[tuple[str, str], list[tuple[int, PortMapping]]]]:
    """The port spec problems of ``env``'s services, and per (environment, service) the
    mappings that publish a host port."""
    problems: list[Problem] = []
    published: dict[tuple[str, str], list[tuple[int, PortMapping]]] = {}
    for name, doc in _valid(env.services):
        found, published[(env.name, name)] = _published_once(doc, cache)
        problems += found
    return problems, published


def placed_ports(
    env_replicas: Iterable[Replica], published: dict[tuple[str, str], list[tuple[int, PortMapping]]]
) -> tuple[tuple[Replica, list[tuple[int, PortMapping]]], ...]:
    """The replicas on a node that publish host ports, with their mappings."""
    out = []
    for rep in env_replicas:
        mappings = published.get((rep.environment, rep.service), [])
        if rep.node is not None and mappings:
            out.append((rep, mappings))
    return tuple(out)


def port_conflicts(placed: Iterable[tuple[Replica, list[tuple[int, PortMapping]]]]) -> Iterator[Problem]:
    """Two replicas on one node publishing the same host port (all environments together)."""
    # (node, host port, protocol) -> host ip (None: all addresses) -> the replica holding it
    taken: dict[tuple[str, int, str], dict[str | None, Replica]] = defaultdict(dict)
    first_here: dict[tuple[str, str, str], Replica] = {}
    for rep, mappings in placed:
        assert rep.node is not None
        twin = first_here.setdefault((rep.environment, rep.service, rep.node), rep)
        if twin is not rep:  # two replicas of one service on one node: every port clashes
            i, m = mappings[0]
            yield _clash(rep, i, m, twin)
            continue
        clashed: set[int] = set()
        for i, m in mappings:
            if i in clashed:
                continue
            holders = taken[(rep.node, m.host_port or 0, m.protocol)]
            ip = None if m.host_ip in _ANY_ADDRESS else m.host_ip
            clash = next(iter(holders.values()), None) if ip is None else holders.get(ip, holders.get(None))
            if clash is not None:
                clashed.add(i)
                yield _clash(rep, i, m, clash)
            else:
                holders[ip] = rep


def _clash(rep: Replica, i: int, mapping: PortMapping, owner: Replica) -> Problem:
    port, by = f"{mapping.host_port}/{mapping.protocol}", f"{owner.item_id} ({owner.doc.file})"
    msg = f"host port {port} on node {rep.node} is already published by {by}"
    return at(rep.doc, ["ports", i], "port-conflict", msg)


# per node: (CPUs, memory in bytes, item id) of each replica there that reserves resources
ResourceUses = dict[str, list[tuple[float, int, str]]]


def resource_uses(env_replicas: Iterable[Replica]) -> ResourceUses:
    used: ResourceUses = defaultdict(list)
    for rep in env_replicas:
        res = rep.spec.get("resources", {}) if rep.doc.is_sound("resources") else {}
        if rep.node is not None and res:
            used[rep.node].append(
                (float(res.get("cpus", 0)), memory_bytes(res.get("memory", "0")), rep.item_id)
            )
    return dict(used)


def capacity(repo: ConfigRepo, used: ResourceUses) -> Iterator[Problem]:
    """What the replicas on each node reserve (all environments together) against its capacity."""
    for node, uses in sorted(used.items()):
        doc = repo.nodes[node]
        cap = doc.data.get("capacity", {}) if doc.is_sound("capacity") else {}
        cpus = sum(u[0] for u in uses)
        if "cpus" in cap and cpus > cap["cpus"] + 1e-9:
            msg = f"node {node}: replicas here need {cpus:g} CPUs, capacity is {cap['cpus']:g}"
            msg += f" (largest: {_largest(uses)})"
            yield at(doc, ["capacity", "cpus"], "capacity-exceeded", msg)
        mem = sum(u[1] for u in uses)
        if "memory" in cap and mem > memory_bytes(cap["memory"]):
            need = format_bytes(mem)
            msg = f"node {node}: replicas here need {need} memory, capacity is {cap['memory']}"
            msg += f" (largest: {_largest(uses)})"
            yield at(doc, ["capacity", "memory"], "capacity-exceeded", msg)


def _largest(uses: list[tuple[float, int, str]]) -> str:
    return ", ".join(i for _, _, i in sorted(uses, reverse=True)[:3])


@dataclass(frozen=True)
class EnvironmentCheck:
    """What the rules make of one environment (with the inventory): its problems, and what
    the rules spanning environments need of it: its placed replicas that publish host
    ports, and what its replicas reserve on each node."""

    problems: tuple[Problem, ...]
    ports: tuple[tuple[Replica, list[tuple[int, PortMapping]]], ...]
    uses: ResourceUses


def check_environment(repo: ConfigRepo, env: Environment, cache: ReadCache | None = None) -> EnvironmentCheck:
    """Every rule that reads one environment and the inventory only, over ``env``. With
    ``cache``, what the rules of one service file make of it (its name, references,
    update policy and SOPS references) is kept while what they read besides it is
    unchanged (:func:`service_context`): a commit that changed a few services of a large
    environment checks those again, and what spans its services (cycles, replicas,
    replacements, host ports) over all of them."""
    view = ConfigRepo(nodes=repo.nodes, environments={env.name: env}, commit=repo.commit)
    problems = [*environment_names(env), *environment_settings(view), *notify_targets(view)]
    problems += freeze_windows(view)
    problems += secret_file_problems(env)
    problems += preview_problems(view)
    problems += image_policy_problems(view)
    context = service_context(repo, env) if cache is not None else None
    checked = per_service(
        cache,
        "service-rules",
        context,
        env,
        lambda names: {
            name: (
                tuple(service_update_problems(env, env.services[name])),
                tuple(_service_rules(repo, env, name, env.services[name])),
            )
            for name in names
        },
    )
    updates: list[Problem] = []
    for name in sorted(env.services):
        updates += checked[name][0]
        problems += checked[name][1]
    problems += dedupe_update_problems(updates)
    problems += cycles(env)
    env_replicas = environment_replicas(repo, env, partial=True, cache=cache)
    port_problems, published = port_specs(env, cache)
    problems += port_problems
    problems += replacements(view, env_replicas)
    ports = placed_ports(env_replicas, published)
    return EnvironmentCheck(tuple(problems), ports, resource_uses(env_replicas))


def _service_rules(repo: ConfigRepo, env: Environment, name: str, doc: Document) -> Iterator[Problem]:
    """The rules of one service file but its update policy's (deduplicated across services)."""
    yield from _file_name(name, doc)
    yield from service_secret_problems(repo, env, doc)
    yield from service_references(repo, env, doc)


def _document_id(doc: Document | None) -> tuple[str, str | None] | None:
    return None if doc is None else (doc.file, doc.content_id)


def service_context(repo: ConfigRepo, env: Environment) -> tuple[Any, ...] | None:
    """What the rules of one service file read besides it: the environment's file,
    placement file and SOPS files, the names of its networks, the names and kinds of its
    services (``depends_on``, ``replaces``) and the inventory. None when one of those files
    has no content id (not from git): nothing is kept then."""
    nodes = inventory_key(repo)
    docs = [d for d in (env.doc, env.placement, *env.secrets.values()) if d is not None]
    if nodes is None or any(d.content_id is None for d in docs):
        return None
    services = tuple((n, _is_process(d)) for n, d in sorted(env.services.items()))
    secrets = tuple((n, d.content_id) for n, d in sorted(env.secrets.items()))
    return (env.name, _document_id(env.doc), _document_id(env.placement), tuple(sorted(env.networks)),
            services, secrets, nodes)  # fmt: skip


def semantic_problems(repo: ConfigRepo, cache: ReadCache | None = None) -> list[Problem]:
    """Every rule's problems: per environment (with the inventory), then what spans them
    (host ports and capacity per node). With ``cache`` (``validate``'s), an environment
    whose files and the inventory are unchanged since a check before is not checked
    again, and what a rule makes of one file alone is kept by the file's path and content."""
    problems = list(node_names(repo))
    ports: list[tuple[Replica, list[tuple[int, PortMapping]]]] = []
    used: ResourceUses = defaultdict(list)
    for name in sorted(repo.environments):
        env = repo.environments[name]
        checked = per_environment(
            cache, "environment-rules", repo, env, lambda e: check_environment(repo, e, cache)
        )
        problems += checked.problems
        ports += checked.ports
        for node, uses in checked.uses.items():
            used[node] += uses
    problems += port_conflicts(ports)
    problems += capacity(repo, used)
    return problems
