"""Semantic rules that span files (DESIGN §2), run after the schemas.

Each rule reads only schema-valid documents, so it can trust their shape; names of files
that failed the schema still count as existing, so one bad file is not reported again as a
dangling reference everywhere. Each problem points at the value that breaks the rule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from config_repo.assignment import Replica, replicas
from config_repo.model import ConfigRepo, Document, Environment, PathPart
from config_repo.problems import Problem
from config_repo.quantities import PortMapping, format_bytes, memory_bytes, parse_ports
from schemas.registry import pointer


def at(doc: Document, path: list[PathPart], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))


def _valid(docs: dict[str, Document]) -> Iterator[tuple[str, Document]]:
    for name in sorted(docs):
        if docs[name].schema_ok:
            yield name, docs[name]


def names(repo: ConfigRepo) -> Iterator[Problem]:
    tables = [repo.nodes] + [t for e in repo.environments.values() for t in (e.networks, e.services)]
    for table in tables:
        for stem, named in _valid(table):
            if named.data["name"] != stem:
                msg = f"name {named.data['name']!r} must equal the file name {stem!r}"
                yield at(named, ["name"], "name-mismatch", msg)
    for env in repo.environments.values():
        pairs: list[tuple[Document | None, str]] = [
            (env.doc, "name"),
            (env.placement, "environment"),
        ]
        for doc, key in pairs:
            if doc is not None and doc.schema_ok and doc.data[key] != env.name:
                msg = f"{key} {doc.data[key]!r} must equal the folder name {env.name!r}"
                yield at(doc, [key], "name-mismatch", msg)


def environment_settings(repo: ConfigRepo) -> Iterator[Problem]:
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not doc.schema_ok:
            continue
        track = doc.data.get("track", "main")
        if track.startswith("refs/tags/") and doc.data.get("placement", "auto") == "auto":
            msg = (
                "an environment that tracks a tag can only use placement: review "
                "(placement never writes to a tag)"
            )
            yield at(doc, ["track"], "tag-auto-placement", msg)


def references(repo: ConfigRepo, env: Environment) -> Iterator[Problem]:
    for _name, doc in _valid(env.services):
        data = doc.data
        pin = data.get("placement", {}).get("node")
        if pin is not None:
            node = repo.nodes.get(pin)
            if node is None:
                yield at(doc, ["placement", "node"], "unknown-node", f"node {pin!r} is not in nodes/")
            elif node.schema_ok and node.data.get("cordoned"):
                msg = f"node {pin!r} is cordoned; pin the service elsewhere or uncordon the node"
                yield at(doc, ["placement", "node"], "cordoned-node", msg)
        for i, net in enumerate(data.get("networks", [])):
            if net not in env.networks:
                msg = f"network {net!r} is not declared in {env.dir}/networks/"
                yield at(doc, ["networks", i], "unknown-network", msg)
        for i, dep in enumerate(data.get("depends_on", [])):
            if dep not in env.services:
                msg = f"depends_on {dep!r}: no such service in {env.dir}/services/"
                yield at(doc, ["depends_on", i], "unknown-dependency", msg)
        target = data.get("replaces")
        if target is not None:
            other = env.services.get(target)
            if other is None:
                msg = f"replaces {target!r}: no such service in {env.dir}/services/"
                yield at(doc, ["replaces"], "replaces-unknown", msg)
            elif other.schema_ok and other.data.get("kind", "container") != "container":
                msg = f"replaces {target!r}: that service is a process; only a container is replaced"
                yield at(doc, ["replaces"], "replaces-unknown", msg)


def cycles(env: Environment) -> Iterator[Problem]:
    graph = {
        n: [d for d in doc.data.get("depends_on", []) if d in env.services] for n, doc in _valid(env.services)
    }
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    reported: set[frozenset[str]] = set()

    def visit(node: str, stack: list[str]) -> Iterator[Problem]:
        state[node] = 1
        stack.append(node)
        for dep in graph.get(node, []):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                if frozenset(cycle) not in reported:
                    reported.add(frozenset(cycle))
                    doc = env.services[node]
                    i = doc.data["depends_on"].index(dep)
                    yield at(
                        doc,
                        ["depends_on", i],
                        "dependency-cycle",
                        "dependency cycle: " + " → ".join(cycle),
                    )
            elif dep not in state:
                yield from visit(dep, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            yield from visit(name, [])


def ports(all_replicas: list[Replica]) -> Iterator[Problem]:
    taken: dict[str, list[tuple[PortMapping, Replica]]] = defaultdict(list)
    for rep in all_replicas:
        for i, spec in enumerate(rep.spec.get("ports", [])):
            try:
                mappings = parse_ports(spec)
            except ValueError as e:
                if rep.index == 0:
                    yield at(rep.doc, ["ports", i], "port-syntax", str(e))
                continue
            if rep.node is None:
                continue
            for mapping in mappings:
                clash = next((r for m, r in taken[rep.node] if m.overlaps(mapping)), None)
                if clash is not None:
                    owner = f"{clash.item_id} ({clash.doc.file})"
                    port = f"{mapping.host_port}/{mapping.protocol}"
                    msg = f"host port {port} on node {rep.node} is already published by {owner}"
                    yield at(rep.doc, ["ports", i], "port-conflict", msg)
                    break
                taken[rep.node].append((mapping, rep))


def capacity(repo: ConfigRepo, all_replicas: list[Replica]) -> Iterator[Problem]:
    used: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for rep in all_replicas:
        res = rep.spec.get("resources", {})
        if rep.node is not None and res:
            used[rep.node].append(
                (float(res.get("cpus", 0)), memory_bytes(res.get("memory", "0")), rep.item_id)
            )
    for node, uses in sorted(used.items()):
        doc = repo.nodes[node]
        cap = doc.data.get("capacity", {}) if doc.schema_ok else {}
        top = ", ".join(i for _, _, i in sorted(uses, reverse=True)[:3])
        cpus = sum(u[0] for u in uses)
        if "cpus" in cap and cpus > cap["cpus"] + 1e-9:
            msg = f"node {node}: replicas here need {cpus:g} CPUs, capacity is {cap['cpus']:g}"
            msg += f" (largest: {top})"
            yield at(doc, ["capacity", "cpus"], "capacity-exceeded", msg)
        mem = sum(u[1] for u in uses)
        if "memory" in cap and mem > memory_bytes(cap["memory"]):
            need = format_bytes(mem)
            msg = f"node {node}: replicas here need {need} memory, capacity is {cap['memory']}"
            msg += f" (largest: {top})"
            yield at(doc, ["capacity", "memory"], "capacity-exceeded", msg)


def semantic_problems(repo: ConfigRepo) -> list[Problem]:
    problems = [*names(repo), *environment_settings(repo)]
    for env in repo.environments.values():
        problems += [*references(repo, env), *cycles(env)]
    all_replicas = replicas(repo)
    problems += [*ports(all_replicas), *capacity(repo, all_replicas)]
    return problems
