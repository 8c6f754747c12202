"""Turning a desired container spec into the parameters of a Docker create call.

Pure except for reading ``{file: name}`` env values on this host (``secret_files``); called by
``docker_port`` just before it creates a container. It never talks to Docker and never
logs a secret value (errors name the file, not its content).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node_agent.errors import SpecError
from node_agent.models import COMMIT, DIGEST, ENVIRONMENT, MANAGED, NODE, REPLICA, SERVICE, STOP_TIMEOUT, Spec
from node_agent.secret_files import DEFAULT_SECRETS_DIR, read_secret
from node_agent.sops_secrets import NO_SOPS, SopsSecrets

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


def runtime_env(spec: Spec, node: str) -> dict[str, str]:
    """What a container learns about itself (as Nomad's ``NOMAD_*``); they win over ``env``.

    ``PHRAME_COMMIT`` is the item's commit (the one that last changed it), so it never
    makes an unchanged container differ and nothing is recreated for it.
    """
    return {
        "PHRAME_NODE": node,
        "PHRAME_ENVIRONMENT": str(spec["environment"]),
        "PHRAME_SERVICE": str(spec.get("service", "")),
        "PHRAME_REPLICA": str(spec.get("replica", "")),
        "PHRAME_COMMIT": str(spec["commit"]),
    }


def resolve_env(
    env: Mapping[str, Any] | None,
    item: str,
    secrets_dir: Path = DEFAULT_SECRETS_DIR,
    *,
    sops: SopsSecrets = NO_SOPS,
    encrypted: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Env values, with ``{file: name}`` read from ``secrets_dir`` on this host and
    ``{secret: file/key}`` decrypted by ``sops`` from ``encrypted`` (the item's ``secrets``)."""
    out: dict[str, str] = {}
    for key, value in (env or {}).items():
        if isinstance(value, Mapping):
            try:
                if "secret" in value:
                    out[key] = sops.value(encrypted, str(value["secret"]))
                else:
                    out[key] = read_secret(secrets_dir, str(value.get("file") or ""))
            except SpecError as e:
                raise SpecError(f"{item}: env {key}: {e}") from None
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
    # the compose fields (stop_signal ... logging); None / empty: Docker's or the image's own
    stop_signal: str | None = None
    stop_timeout: int | None = None  # whole seconds (Docker's StopTimeout)
    user: str | None = None
    working_dir: str | None = None
    hostname: str | None = None
    extra_hosts: dict[str, str] | None = None
    ulimits: list[dict[str, Any]] | None = None  # [{"name", "soft", "hard"}]
    log_config: dict[str, Any] | None = None  # {"type", "config"}


def stop_timeout_s(grace: str | None) -> int | None:
    """``stop_grace_period`` as Docker's StopTimeout: whole seconds, rounded up, so a
    grace of 1500ms never kills sooner than asked."""
    if grace is None:
        return None
    return math.ceil(duration_ns(grace) / 10**9)


def _signal(value: Any) -> str | None:
    # Docker takes a number as text too ("3" is SIGQUIT)
    return None if value is None else str(value)


def _ulimits(value: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    if not value:
        return None
    return [{"name": k, "soft": int(v["soft"]), "hard": int(v["hard"])} for k, v in sorted(value.items())]


def _log_config(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not value:
        return None
    options = value.get("options") or {}
    return {"type": str(value["driver"]), "config": {str(k): str(v) for k, v in options.items()}}


def create_params(
    spec: Spec,
    node: str,
    *,
    name: str | None = None,
    secrets_dir: Path = DEFAULT_SECRETS_DIR,
    sops: SopsSecrets = NO_SOPS,
) -> CreateParams:
    """``name`` is the Docker name (``naming.container_name``), by default the item id;
    ``{file: ...}`` env values are read from ``secrets_dir``."""
    name = name or spec["name"]
    stop_timeout = stop_timeout_s(spec.get("stop_grace_period"))
    # the stop timeout in a label too: a stop reads it from the container list, no inspect
    labels = managed_labels(spec, node) | {STOP_TIMEOUT: "" if stop_timeout is None else str(stop_timeout)}
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
        environment=resolve_env(spec.get("env"), name, secrets_dir, sops=sops, encrypted=spec.get("secrets"))
        | runtime_env(spec, node),
        labels=labels,
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
        stop_signal=_signal(spec.get("stop_signal")),
        stop_timeout=stop_timeout,
        user=spec.get("user"),
        working_dir=spec.get("working_dir"),
        hostname=spec.get("hostname"),
        extra_hosts=dict(spec["extra_hosts"]) if spec.get("extra_hosts") else None,
        ulimits=_ulimits(spec.get("ulimits")),
        log_config=_log_config(spec.get("logging")),
    )
