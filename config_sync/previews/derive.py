"""The pure part of a preview: which services, which node, which host ports, and the
repository that renders them as environment ``<env>-mr-<iid>``.

:class:`config_sync.previews.manager.PreviewManager` calls :func:`preview_spec` on the
target's head (an MR never grants itself a preview) and :func:`derive` on the MR's head; the
renderer then names every container ``<env>-mr-<iid>.<service>.0`` and every network
``<env>-mr-<iid>.<net>``, so nothing of the environment's own is touched. No I/O here.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from phrame.config_repo import ConfigRepo, Environment
from phrame.config_repo.model import Document
from phrame.config_repo.preview_rules import label_text, nodes_with_labels, preview_name
from phrame.config_repo.quantities import PortMapping, parse_ports

PORT_FIRST, PORT_LAST = 20000, 29999  # host ports a preview's published ports are moved into
DEFAULT_AUTO_STOP_H = 48.0
PortKey = tuple[str, int]  # (service, index of the mapping in its expanded ``ports``)


class PreviewUnplaceable(Exception):
    """No node can run the preview, or no host port is left in the range (said in the note)."""


@dataclass(frozen=True)
class PreviewSpec:
    """An environment's ``preview:`` block as its target head declares it."""

    environment: str
    node: str | None = None
    labels: Mapping[str, str] | None = None
    services: tuple[str, ...] | None = None  # None: all
    auto_stop_h: float = DEFAULT_AUTO_STOP_H


def preview_spec(repo: ConfigRepo, environment: str) -> PreviewSpec | None:
    """``environment``'s ``preview:`` in ``repo`` (validated), or None when it has none."""
    env = repo.environments.get(environment)
    block = env.settings.get("preview") if env is not None else None
    if not isinstance(block, dict):
        return None
    nodes = block.get("nodes") or {}
    labels = nodes.get("labels")
    services = block.get("services")
    return PreviewSpec(
        environment=environment,
        node=nodes.get("node"),
        labels={str(k): label_text(v) for k, v in labels.items()} if isinstance(labels, dict) else None,
        services=tuple(services) if services else None,
        auto_stop_h=float(block.get("auto_stop_h", DEFAULT_AUTO_STOP_H)),
    )


def select_services(env: Environment, wanted: Collection[str] | None) -> list[str]:
    """``wanted`` (None: every service) and, transitively, what they depend on or replace;
    a name the head no longer has is left out."""
    todo = sorted(wanted) if wanted is not None else sorted(env.services)
    chosen: set[str] = set()
    while todo:
        name = todo.pop()
        doc = env.services.get(name)
        if name in chosen or doc is None or not isinstance(doc.data, dict):
            continue
        chosen.add(name)
        todo += [d for d in doc.data.get("depends_on", []) if isinstance(d, str)]
        if isinstance(doc.data.get("replaces"), str):
            todo.append(doc.data["replaces"])
    return sorted(chosen)


def choose_node(repo: ConfigRepo, spec: PreviewSpec, name: str) -> str:
    """The one node the whole preview runs on: the pinned node, or among the nodes carrying
    the labels the one ``name`` hashes to (stable across updates, spread across previews)."""
    if spec.node is not None:
        if spec.node not in repo.nodes:
            raise PreviewUnplaceable(f"preview node {spec.node!r} is not in nodes/")
        return spec.node
    candidates = nodes_with_labels(repo, dict(spec.labels or {}))
    if not candidates:
        shown = ", ".join(f"{k}={v}" for k, v in sorted((spec.labels or {}).items()))
        raise PreviewUnplaceable(f"no node carries the preview labels {shown}")
    pick = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(candidates)
    return candidates[pick]


def published_ports(env: Environment, services: Collection[str]) -> dict[PortKey, PortMapping]:
    """Every host-published mapping of ``services`` (their ``ports``, expanded)."""
    out: dict[PortKey, PortMapping] = {}
    for service in sorted(services):
        data = env.services[service].data
        mappings = [m for p in data.get("ports", []) for m in parse_ports(p)]
        for i, m in enumerate(mappings):
            if m.host_port is not None:
                out[(service, i)] = m
    return out


def allocate_ports(
    wanted: Collection[PortKey],
    *,
    used: Collection[int],
    previous: Mapping[PortKey, int] | None = None,
    first: int = PORT_FIRST,
    last: int = PORT_LAST,
) -> dict[PortKey, int]:
    """A host port in ``first``-``last`` (``PHRAME_PREVIEW_PORTS``) for each key: the one it had
    (``previous``) while still free, else the lowest free one, in key order. ``used``: the
    host ports other items publish on the preview's node (the environment's, other previews')."""
    taken = set(used)
    out: dict[PortKey, int] = {}
    for key in sorted(wanted):
        port = (previous or {}).get(key)
        if port is not None and port not in taken and first <= port <= last:
            out[key] = port
            taken.add(port)
    for key in sorted(wanted):
        if key in out:
            continue
        port = next((p for p in range(first, last + 1) if p not in taken), None)
        if port is None:
            raise PreviewUnplaceable(f"no free host port left in {first}-{last} (PHRAME_PREVIEW_PORTS)")
        out[key] = port
        taken.add(port)
    return out


def _port_text(m: PortMapping, host_port: int | None) -> str:
    ip = f"[{m.host_ip}]" if m.host_ip and ":" in m.host_ip else m.host_ip
    host = f"{ip}:{host_port}" if ip else str(host_port)
    return (
        f"{host}:{m.container_port}/{m.protocol}"
        if host_port is not None
        else f"{m.container_port}/{m.protocol}"
    )


def derive(
    repo: ConfigRepo,
    environment: str,
    iid: int,
    *,
    services: Collection[str],
    node: str,
    ports: Mapping[PortKey, int],
) -> ConfigRepo:
    """A repository holding only environment ``<environment>-mr-<iid>``: ``services`` of
    ``repo``'s ``environment`` (one replica each, pinned to ``node``, host ports from
    ``ports``), its networks, and the inventory. Render it as any validated repository."""
    env = repo.environments[environment]
    name = preview_name(environment, iid)
    settings = {k: v for k, v in env.settings.items() if k not in ("preview", "track", "protected", "freeze")}
    settings["name"] = name
    settings["placement"] = "review"  # placement never writes a preview's node.json
    out = Environment(name, doc=_doc(env.doc.file if env.doc else f"{env.dir}/environment.yaml", settings))
    out.networks = {n: _doc(d.file, copy.deepcopy(d.data)) for n, d in env.networks.items()}
    out.secrets = dict(env.secrets)  # the SOPS files its services' {secret: ...} values name
    for service in sorted(services):
        src = env.services[service]
        data = copy.deepcopy(src.data)
        data["replicas"] = 1
        data["placement"] = {"node": node}
        if "ports" in data:
            mappings = [m for p in data["ports"] for m in parse_ports(p)]
            data["ports"] = [
                _port_text(m, ports.get((service, i)) if m.host_port is not None else None)
                for i, m in enumerate(mappings)
            ]
        data["depends_on"] = [d for d in data.get("depends_on", []) if d in services]
        out.services[service] = _doc(src.file, data)
    derived = ConfigRepo(nodes=dict(repo.nodes), environments={name: out}, commit=repo.commit)
    derived.problems = []  # its source validated clean; render needs no second reading
    return derived


def _doc(file: str, data: Any) -> Document:
    return Document(file, data, schema_ok=True)
