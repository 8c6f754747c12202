"""One desired container (or a group of identical replicas) → one compose service entry,
and one desired network → one compose network entry. Every literal ``$`` is escaped, since
compose would read it as a variable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap

from phrame.compose.interpolation import escape
from phrame.compose.yaml_writing import quoted

# Container fields that compose spells the same way and takes in the same shape.
PASSTHROUGH = ("stop_signal", "user", "working_dir", "hostname", "extra_hosts", "ulimits", "logging")
_UNITS = (("g", 2**30), ("m", 2**20), ("k", 2**10))
# Keys written first, in this order; every other key of a mapping follows sorted. The same
# desired state gives the same bytes whatever its payloads' key order (the mirror's snapshot
# sorts keys, a fresh rendering does not).
_FIRST = ("test", "interval", "timeout", "start_period", "start_interval", "retries", "soft", "hard",
          "driver", "options")  # fmt: skip


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        keys = [k for k in _FIRST if k in value] + sorted(k for k in value if k not in _FIRST)
        return {k: _canonical(value[k]) for k in keys}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    return value


def port_text(p: Mapping[str, Any]) -> str:
    ip, host = p.get("host_ip"), p.get("host_port")
    text = str(p["container_port"])
    if ip:
        ip_text = f"[{ip}]" if ":" in ip else ip
        text = f"{ip_text}:{host if host is not None else ''}:{text}"
    elif host is not None:
        text = f"{host}:{text}"
    return text if p.get("protocol", "tcp") == "tcp" else f"{text}/{p['protocol']}"


def memory_text(n: int) -> str | int:
    for suffix, size in _UNITS:
        if n % size == 0:
            return f"{n // size}{suffix}"
    return n


def _cpus(nano: int) -> float | int:
    cpus = nano / 1e9
    return int(cpus) if cpus == int(cpus) else cpus


def secret_source(value: Mapping[str, Any]) -> str:
    """What a secret env value stands for: its file name, or ``sops-<file>/<key>``."""
    return f"sops-{value['secret']}" if "secret" in value else str(value["file"])


def _env(env: Mapping[str, Any], secrets: Mapping[str, str]) -> CommentedMap:
    out = CommentedMap()
    for k, v in sorted(env.items()):
        if isinstance(v, dict) and "secret" in v:  # a SOPS value: the node's agent decrypts it
            var = secrets[secret_source(v)]
            out[k] = f"${{{var}:?set {var} to the value of the SOPS secret {v['secret']}}}"
            out.yaml_add_eol_comment(f"secret: SOPS {v['secret']}, decrypted by the node's agent", k)
        elif isinstance(v, dict):
            var = secrets[v["file"]]
            # ${VAR:?...}: compose refuses to start without it rather than pass an empty secret
            out[k] = f"${{{var}:?set {var} to the content of the secret file {v['file'].replace('}', '')}}}"
            out.yaml_add_eol_comment(f"secret: PHRAME_SECRETS_DIR/{v['file']} on the node", k)
        else:
            out[k] = escape(str(v))
    return out


def runtime_env(p: Mapping[str, Any], node: str) -> dict[str, str]:
    """The agent's ``PHRAME_*`` identity variables (node_agent.container_config.runtime_env)."""
    return {
        "PHRAME_NODE": node,
        "PHRAME_ENVIRONMENT": str(p["environment"]),
        "PHRAME_SERVICE": str(p.get("service", "")),
        "PHRAME_REPLICA": str(p.get("replica", "")),
        "PHRAME_COMMIT": str(p.get("commit", "")),
    }


def _volume(text: str, volumes: set[str]) -> str:
    source = text.split(":", 1)[0]
    if not source.startswith(("/", ".", "~")):
        volumes.add(source)  # a named volume: compose wants it declared
    return escape(text)


def container_service(
    replicas: list[dict[str, Any]],
    *,
    compose_name: Mapping[str, str],
    healthy: set[str],
    networks: Mapping[str, str],
    secrets: Mapping[str, str],
    volumes: set[str],
    node: str,
    alias: str | None = None,
) -> CommentedMap:
    p = replicas[0]
    out = CommentedMap()
    out["image"] = escape(p["image"])
    if p.get("pull") == "always":
        out["pull_policy"] = "always"
    for key in ("entrypoint", "command"):
        if p.get(key) is not None:
            out[key] = _escaped(list(p[key]))
    out["environment"] = _env(p.get("env") or {}, secrets)
    # what the agent adds to every container (it wins over env); a scaled entry shares one
    # environment, so its replicas cannot each be told their number
    runtime = runtime_env(p, node)
    if len(replicas) > 1:
        del runtime["PHRAME_REPLICA"]
    out["environment"].update(runtime)
    if p.get("ports"):
        out["ports"] = [quoted(port_text(port)) for port in p["ports"]]
    if p.get("volumes"):
        out["volumes"] = [_volume(v, volumes) for v in p["volumes"]]
    nets = [networks[n] for n in p.get("networks") or [] if n in networks]
    if nets and alias:  # renamed (two environments share the name): keep the host name
        out["networks"] = {n: {"aliases": [alias]} for n in nets}
    else:
        # no networks: the agent attaches the container to Docker's default bridge, as this does
        out.update({"networks": nets} if nets else {"network_mode": "bridge"})
    res = p.get("resources") or {}
    if "nano_cpus" in res:
        out["cpus"] = _cpus(int(res["nano_cpus"]))
    if "memory" in res:
        out["mem_limit"] = memory_text(int(res["memory"]))
    if p.get("healthcheck"):
        health = {k: v for k, v in p["healthcheck"].items() if v is not None}
        out["healthcheck"] = _escaped(_canonical(health))
    out["restart"] = p.get("restart") or "no"
    deps: dict[str, str] = {}
    for dep in p.get("depends_on") or []:
        if dep in compose_name and compose_name[dep] not in deps:
            deps[compose_name[dep]] = "service_healthy" if dep in healthy else "service_started"
    if deps:
        out["depends_on"] = {d: {"condition": c} for d, c in deps.items()}
    if p.get("labels"):
        out["labels"] = {k: escape(str(v)) for k, v in sorted(p["labels"].items())}
    for key in PASSTHROUGH:
        if p.get(key) not in (None, {}, []):
            out[key] = _escaped(str(p[key]) if key == "stop_signal" else _canonical(p[key]))
    if p.get("stop_grace_period") is not None:
        grace = p["stop_grace_period"]
        out["stop_grace_period"] = f"{grace}s" if isinstance(grace, int | float) else grace
    if len(replicas) > 1:
        out["scale"] = len(replicas)
    out["x-phrame"] = {
        "environment": p["environment"],
        "service": p["service"],
        "items": [r["name"] for r in replicas],
        "commit": p.get("commit"),
    }
    return out


def network_entry(p: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"driver": p.get("driver") or "bridge"}
    if p.get("internal"):
        out["internal"] = True
    if p.get("subnet"):
        out["ipam"] = {"config": [{"subnet": p["subnet"]}]}
    if p.get("labels"):
        out["labels"] = {k: escape(str(v)) for k, v in sorted(p["labels"].items())}
    return out
