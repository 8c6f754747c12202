"""A compose file → phrame-config files under ``environments/<env>/`` (``import_compose``).

Reads the file as the config repo reads YAML (1.2, with line numbers for errors), maps
each service, network and named volume, and lists what has no equivalent. Pinned to
``node`` when given; otherwise no placement (placement chooses). Never writes files and
never reads the importer's environment.
"""

from __future__ import annotations

from typing import Any

from phrame.compose.importing.dangerous import dangerous_settings
from phrame.compose.importing.service import ServiceImport
from phrame.compose.importing.text import Context
from phrame.compose.importing.top import network_file, volume_names
from phrame.compose.interpolation import InterpolationError, resolve
from phrame.compose.models import ComposeError, ImportResult, Unsupported
from phrame.compose.names import NAME, phrame_name, unique
from phrame.compose.reading import read_compose
from phrame.compose.yaml_writing import dump
from phrame.config_repo.model import Document
from phrame.config_repo.quantities import parse_ports
from schemas.registry import schema

_TOP_KEYS = {"version", "name", "services", "networks", "volumes"}
DEFAULT_NETWORK = "default"


def _fields() -> frozenset[str]:
    return frozenset(schema("service-container")["properties"])


def _own_name(name: str, spec: dict[str, Any]) -> str:
    """The phrame name: an export's ``x-phrame.service`` (its key may carry the environment)."""
    meta = spec.get("x-phrame")
    own = meta.get("service") if isinstance(meta, dict) else None
    return own if isinstance(own, str) and NAME.match(own) else phrame_name(name)


def _image_needs_variable(image: Any) -> bool:
    try:
        return isinstance(image, str) and resolve(image).value is None
    except InterpolationError:
        return False  # ServiceImport reports it as a ComposeError with its line


def _service_names(services: dict[str, Any], result: ImportResult) -> dict[str, str]:
    """compose name → phrame name, for the services that can be imported."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for name, spec in services.items():
        if not isinstance(spec, dict):
            result.unsupported.append(Unsupported(name, "", "not a mapping; skipped"))
        elif spec.get("profiles"):
            result.unsupported.append(
                Unsupported(name, "profiles", "only started with --profile in compose; not imported")
            )
        elif "image" not in spec:
            why = (
                "no image (build: only): build and push it, then set image" if "build" in spec else "no image"
            )
            result.unsupported.append(Unsupported(name, "image", f"{why}; not imported"))
        elif _image_needs_variable(spec["image"]):
            why = (
                f"{spec['image']!r} needs a variable with no default (the importer's environment is not read)"
            )
            result.unsupported.append(Unsupported(name, "image", f"{why}; not imported"))
        else:
            names[name] = unique(_own_name(name, spec), taken)
            meta = spec.get("x-phrame")
            own = meta.get("service") if isinstance(meta, dict) else None
            if names[name] != name and names[name] != own:  # an export's key keeps its own name
                why = f"renamed {names[name]}: phrame names are lower-case letters, digits and '-'"
                result.unsupported.append(
                    Unsupported(name, "name", f"{why}; other services must call it {names[name]}")
                )
    return names


def _one_binding(name: str, body: dict[str, Any], result: ImportResult) -> None:
    """Replicas pinned to one node cannot all bind one host port (swarm's routing mesh
    shares it; Docker alone refuses): keep one replica, so the files validate and run."""
    fixed = [p for p in body.get("ports", []) if any(m.host_port for m in parse_ports(p))]
    if body.get("replicas", 1) > 1 and fixed:
        why = f"{body['replicas']} replicas on one node cannot all publish host port {fixed[0]}; 1 kept"
        result.unsupported.append(Unsupported(name, "deploy.replicas", why))
        body["replicas"] = 1


def _check_names(env: str, node: str | None) -> None:
    for what, value in (("environment", env), ("node", node)):
        if value is not None and not NAME.match(value):
            raise ValueError(f"{what} name {value!r} is not ^[a-z0-9][a-z0-9-]{{0,62}}$")


def import_compose(text: str, *, env: str, node: str | None = None) -> ImportResult:
    """phrame-config files for the compose file ``text``. Raises :class:`ComposeError` (with
    line) for a file that is no compose file, ValueError for a bad env or node name."""
    _check_names(env, node)
    doc = read_compose(text)
    data: dict[str, Any] = doc.data
    result = ImportResult()
    for key in data:
        if key not in _TOP_KEYS and not key.startswith("x-"):
            result.unsupported.append(Unsupported("", key, "top-level key with no equivalent; ignored"))
    services = data.get("services") or {}
    names = _service_names(services, result)
    declared = data.get("networks") or {}
    net_taken: set[str] = set()
    net_names = {str(n): unique(phrame_name(str(n)), net_taken) for n in declared}
    if DEFAULT_NETWORK not in net_names:
        net_names[DEFAULT_NETWORK] = unique(DEFAULT_NETWORK, net_taken)
    meta: dict[str, Any] = data["x-phrame"] if isinstance(data.get("x-phrame"), dict) else {}
    secrets: dict[str, Any] = meta["secrets"] if isinstance(meta.get("secrets"), dict) else {}
    ctx = Context(
        services=names,
        networks=net_names,
        volumes=volume_names(data.get("volumes") or {}, result),
        secrets={str(k): str(v) for k, v in secrets.items()},
        fields=_fields(),
        error=lambda msg, path: _error(doc, msg, path),
    )
    base = f"environments/{env}"
    used: set[str] = set()
    for name, phrame in names.items():
        imp = ServiceImport(name, services[name], ctx)
        spec = imp.run()
        result.unsupported.extend(imp.notes)
        if "networks" not in spec:  # compose puts it on the project's default network
            spec["networks"] = [net_names[DEFAULT_NETWORK]]
        if not spec["networks"]:
            del spec["networks"]
        used.update(spec.get("networks", []))
        body = {"name": phrame, **spec}
        result.dangerous.extend(dangerous_settings(name, body))
        if node is not None:
            body["placement"] = {"node": node}
            _one_binding(name, body, result)
        header = f"Imported from compose service {name!r} by phrame import-compose."
        result.files[f"{base}/services/{phrame}.yaml"] = _file(header, _ordered(body))
    by_phrame = {v: k for k, v in net_names.items()}
    for net in sorted(used):
        compose_net = by_phrame[net]
        spec = network_file(net, compose_net, declared.get(compose_net) or {}, result)
        header = f"Imported from compose network {compose_net!r} by phrame import-compose."
        result.files[f"{base}/networks/{net}.yaml"] = _file(header, spec)
    result.files[f"{base}/environment.yaml"] = _file(
        "Created by phrame import-compose.", {"name": env, "placement": "auto"}
    )
    return result


_ORDER = ("name", "image", "pull", "entrypoint", "command", "env", "ports", "volumes", "networks",
          "resources", "replicas", "placement", "healthcheck", "restart", "depends_on", "labels")  # fmt: skip


def _ordered(spec: dict[str, Any]) -> dict[str, Any]:
    first = {k: spec[k] for k in _ORDER if k in spec}
    return {**first, **{k: v for k, v in spec.items() if k not in first}}


def _file(header: str, body: dict[str, Any]) -> str:
    return f"# {header}\n" + dump(body)


def _error(doc: Document, message: str, path: tuple[Any, ...]) -> ComposeError:
    line, col = doc.position(list(path))
    return ComposeError(message, line=line, column=col)
