"""One node's desired state → a docker-compose.yml (``export_node``).

Reads the desired-plane payloads (a mirror snapshot's ``topics`` or ``phrame render
--format topics``); never a secret's value: an ``env: {file: ...}`` becomes a required
``${VAR}`` the person running compose must set. Exported containers carry no
``io.phrame.*`` label, so an agent on the same host never takes them for its own; where
each came from is kept under ``x-phrame``. Processes have no compose form: listed on top.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap

from phrame.compose.exporting.fields import container_service, network_entry, secret_source
from phrame.compose.names import env_var_name, unique
from phrame.compose.yaml_writing import dump
from schemas import PayloadError, Topics, check_payload

_IDENTITY = ("name", "replica", "digest", "commit")


def _node_items(
    desired: Mapping[str, Any], node: str, prefix: str
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[str]]:
    """kind -> item id -> payload, for ``node``'s containers, networks and processes; and
    the items left out because their payload fails its schema (a mirror keeps what it got)."""
    topics = Topics(prefix)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    invalid = []
    for topic, payload in desired.items():
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        if parsed.plane != "desired" or parsed.node != node or parsed.item_id is None:
            continue
        if payload in ("", None, {}):  # a cleared item is no item
            continue
        try:
            check_payload(parsed.schema_name, payload)
        except PayloadError:
            invalid.append(f"{parsed.kind}/{parsed.item_id}")
            continue
        out[parsed.kind][parsed.item_id] = payload
    return out, sorted(invalid)


def _spec(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in _IDENTITY}


def _group(containers: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for _, payload in sorted(containers.items()):
        groups[(payload["environment"], payload["service"])].append(payload)
    for replicas in groups.values():
        replicas.sort(key=lambda p: int(p.get("replica", 0)))
    return dict(sorted(groups.items()))


def _short_names(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(env, name) → ``name``, or ``env-name`` when two environments on the node share it."""
    count: dict[str, int] = defaultdict(int)
    for _, name in pairs:
        count[name] += 1
    taken: set[str] = set()
    return {(e, n): unique(n if count[n] == 1 else f"{e}-{n}", taken) for e, n in pairs}


def _secret_vars(containers: dict[str, dict[str, Any]]) -> dict[str, str]:
    """secret file name → the compose variable that stands for its content."""
    files = sorted(
        {
            secret_source(v)
            for p in containers.values()
            for v in (p.get("env") or {}).values()
            if isinstance(v, dict)
        }
    )
    taken: set[str] = set()
    out = {}
    for f in files:
        var, n = env_var_name(f), 1
        while var in taken:
            n += 1
            var = f"{env_var_name(f)}_{n}"
        taken.add(var)
        out[f] = var
    return out


def _header(
    node: str, commits: set[str], secrets: dict[str, str], processes: dict[str, Any], invalid: list[str]
) -> str:
    lines = [
        f"docker-compose.yml of node {node}'s desired state (phrame export-compose), "
        f"commit {', '.join(sorted(commits)) or 'none'}.",
        "Not managed by phrame: no io.phrame.* labels; x-phrame says where each service came from.",
    ]
    if secrets:
        lines.append("Secrets are never exported: set each variable to the content of the node's file")
        if any(f.startswith("sops-") for f in secrets):
            lines.append(
                "(sops-<file>/<key>: the value of the environment's SOPS file secrets/<file>.sops.yaml)"
            )
        lines += [
            f"  {var}: {f if f.startswith('sops-') else 'PHRAME_SECRETS_DIR/' + f}"
            for f, var in secrets.items()
        ]
    if processes:
        lines.append("Host processes the agent runs on this node (no compose equivalent):")
        for item_id, p in sorted(processes.items()):
            extra = "".join(f", {k} {p[k]}" for k in ("workdir", "user") if p.get(k))
            lines.append(f"  {item_id}: {' '.join(map(str, p.get('command') or []))}{extra}")
    if invalid:
        lines.append(f"left out (invalid payload): {', '.join(invalid)}")
    return "\n".join(lines)


def export_node(desired: Mapping[str, Any], node: str, *, prefix: str = "phrame") -> str:
    """The docker-compose.yml text that runs ``node``'s desired containers and networks."""
    items, invalid = _node_items(desired, node, prefix)
    containers, networks = items.get("containers", {}), items.get("networks", {})
    groups = _group(containers)
    svc_names = _short_names(list(groups))
    net_payloads = {(p["environment"], p["network"]): p for p in networks.values()}
    for p in containers.values():  # a network no item describes still needs a compose entry
        for full in p.get("networks") or []:
            env, _, net = full.partition(".")
            net_payloads.setdefault((env, net), {"environment": env, "network": net})
    net_keys = _short_names(sorted(net_payloads))
    net_by_docker = {f"{e}.{n}": key for (e, n), key in net_keys.items()}
    # a replica whose spec differs from its siblings' (never from render) gets its own entry
    compose_name: dict[str, str] = {}
    entries: list[tuple[str, list[dict[str, Any]]]] = []
    taken = set(svc_names.values())
    for key, replicas in groups.items():
        if all(_spec(r) == _spec(replicas[0]) for r in replicas):
            entries.append((svc_names[key], replicas))
            continue
        for r in replicas:
            name = unique(f"{svc_names[key]}-{r.get('replica', 0)}", taken)
            entries.append((name, [r]))
    for name, replicas in entries:
        for r in replicas:
            compose_name[r["name"]] = name
    healthy = {p["name"] for p in containers.values() if p.get("healthcheck")}
    secrets = _secret_vars(containers)
    services = CommentedMap()
    volumes: set[str] = set()
    for name, replicas in entries:
        services[name] = container_service(
            replicas, compose_name=compose_name, healthy=healthy, networks=net_by_docker,
            secrets=secrets, volumes=volumes, node=node,
            alias=replicas[0]["service"] if replicas[0]["service"] != name else None,
        )  # fmt: skip
    tree = CommentedMap()
    tree["services"] = services
    if net_keys:
        tree["networks"] = CommentedMap(
            (key, network_entry(net_payloads[pair]))
            for pair, key in sorted(net_keys.items(), key=lambda x: x[1])
        )
    if volumes:
        tree["volumes"] = CommentedMap((v, {"name": v}) for v in sorted(volumes))
    meta: dict[str, Any] = {"node": node, "prefix": prefix}
    if secrets:
        meta["secrets"] = {var: f for f, var in secrets.items()}
    if items.get("processes"):
        meta["processes"] = sorted(items["processes"])
    tree["x-phrame"] = meta
    commits = {str(p["commit"]) for p in containers.values() if p.get("commit")}
    tree.yaml_set_start_comment(_header(node, commits, secrets, items.get("processes", {}), invalid))
    return dump(tree)
