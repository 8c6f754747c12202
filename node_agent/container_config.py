"""Turning a desired container spec into the parameters of a Docker create call.

Pure except for reading ``{file: /path}`` env values on this host; called by
``docker_port`` just before it creates a container. It never talks to Docker and never
logs a secret value (errors name the file, not its content).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node_agent.errors import SpecError
from node_agent.models import COMMIT, DIGEST, ENVIRONMENT, MANAGED, NODE, REPLICA, SERVICE, Spec

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def duration_ns(value: str | int | float) -> int:
    """Compose-style duration (``1m30s``, ``500ms``; a bare number is seconds) in ns."""
    if isinstance(value, int | float):
        return int(value * 10**9)
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return int(float(text) * 10**9)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise SpecError(f"invalid duration {value!r} (use e.g. 10s, 1m30s, 500ms)")
    return int(sum(float(n) * _UNIT_NS[u] for n, u in parts))


def managed_labels(spec: Spec, node: str) -> dict[str, str]:
    labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
    labels.update(
        {
            MANAGED: "true",
            NODE: node,
            ENVIRONMENT: spec["environment"],
            DIGEST: spec["digest"],
            COMMIT: spec["commit"],
        }
    )
    if "service" in spec:
        labels[SERVICE] = spec["service"]
        labels[REPLICA] = str(spec["replica"])
    return labels


def resolve_env(env: Mapping[str, Any] | None, item: str) -> dict[str, str]:
    """Env values, with ``{file: path}`` read from this host (one trailing newline dropped)."""
    out: dict[str, str] = {}
    for key, value in (env or {}).items():
        if isinstance(value, Mapping):
            path = Path(value["file"])
            try:
                text = path.read_text("utf-8")
            except OSError as e:
                raise SpecError(f"{item}: env {key}: cannot read {path}: {e.strerror}") from None
            out[key] = text[:-1] if text.endswith("\n") else text
        else:
            out[key] = str(value)
    return out


def healthcheck(check: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not check:
        return None
    if check.get("disable"):
        return {"test": ["NONE"]}
    test = check.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    out: dict[str, Any] = {"test": test}
    for key in ("interval", "timeout", "start_period"):
        if check.get(key) is not None:
            out[key] = duration_ns(check[key])
    if check.get("retries") is not None:
        out["retries"] = int(check["retries"])
    return out


@dataclass(frozen=True)
class CreateParams:
    """Everything docker_port needs to create one container, SDK-agnostic."""

    name: str
    image: str
    command: list[str] | None
    entrypoint: list[str] | None
    environment: dict[str, str]
    labels: dict[str, str]
    exposed: list[tuple[int, str]]
    bindings: dict[str, list[tuple[str, int | None]]]  # "80/tcp" -> [(host_ip, host_port)]
    binds: list[str]  # "src:dst[:mode]"
    anonymous_volumes: list[str]
    networks: list[str]
    aliases: list[str]
    restart: str | None
    nano_cpus: int | None
    memory: int | None
    healthcheck: dict[str, Any] | None


def create_params(spec: Spec, node: str, *, name: str | None = None) -> CreateParams:
    """``name`` is the Docker name (``naming.container_name``), by default the item id."""
    name = name or spec["name"]
    exposed: list[tuple[int, str]] = []
    bindings: dict[str, list[tuple[str, int | None]]] = {}
    for p in spec.get("ports") or ():
        key = f"{p['container_port']}/{p['protocol']}"
        if (p["container_port"], p["protocol"]) not in exposed:
            exposed.append((p["container_port"], p["protocol"]))
        bindings.setdefault(key, []).append((p.get("host_ip") or "", p.get("host_port")))
    binds: list[str] = []
    anonymous: list[str] = []
    for v in spec.get("volumes") or ():
        (binds if ":" in v else anonymous).append(v)
    resources = spec.get("resources") or {}
    restart = spec.get("restart")
    return CreateParams(
        name=name,
        image=spec["image"],
        command=spec.get("command"),
        entrypoint=spec.get("entrypoint"),
        environment=resolve_env(spec.get("env"), name),
        labels=managed_labels(spec, node),
        exposed=exposed,
        bindings=bindings,
        binds=binds,
        anonymous_volumes=anonymous,
        networks=list(spec.get("networks") or ()),
        aliases=[spec["service"]],
        restart=None if restart in (None, "no") else restart,
        nano_cpus=resources.get("nano_cpus"),
        memory=resources.get("memory"),
        healthcheck=healthcheck(spec.get("healthcheck")),
    )
