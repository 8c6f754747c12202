"""What an imported service keeps that gives it power over its host (the ``dangerous`` list).

``compose_file.import_compose`` calls :func:`dangerous_settings` on each service as written
to the config repo. Nothing is dropped here: a reviewer reads the list, and an agent runs
such a service only where its node's policy allows it (``schemas.node_policy``). What the
import drops (privileged, cap_add, devices, pid, ipc, network_mode host) is ``unsupported``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from phrame.compose.models import Dangerous
from phrame.config_repo.quantities import parse_ports
from schemas.node_policy import PROTECTED, is_under, normal

_EVERY_INTERFACE = {None, "", "0.0.0.0", "::"}
_SOCKETS = {"/var/run/docker.sock", "/run/docker.sock"}


def dangerous_settings(service: str, body: Mapping[str, Any]) -> list[Dangerous]:
    """The settings of one imported service (its phrame file's body) worth a reviewer's look."""
    return [Dangerous(service, key, why) for key, why in _findings(body)]


def _findings(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for i, volume in enumerate(body.get("volumes") or ()):
        source = str(volume).split(":", 1)[0]
        if ":" in str(volume) and source.startswith("/"):
            yield f"volumes[{i}]", _mount(normal(source))
    for i, port in enumerate(body.get("ports") or ()):
        try:
            mappings = parse_ports(port)
        except ValueError:
            continue  # validation says what is wrong with it
        if any(m.host_ip in _EVERY_INTERFACE for m in mappings):
            yield (
                f"ports[{i}]",
                f"{port!r} is published on every interface of the host: an agent refuses it unless its "
                "node's policy allows ports.all_interfaces; name a host IP such as 127.0.0.1",
            )
    user = str(body.get("user") or "")
    if user.split(":", 1)[0] in ("root", "0"):
        yield "user", f"{user!r}: the container runs as root"


def _mount(path: str) -> str:
    reached = [p for p in PROTECTED if path == p or (p != "/" and (is_under(path, p) or is_under(p, path)))]
    if path == "/":
        what = "the whole host's file system"
    elif any(p in _SOCKETS for p in reached):
        what = "the Docker socket: whoever holds it is root on the host"
    elif reached:
        what = f"the host's {reached[0]}, a protected path"
    else:
        return (
            f"bind-mounts host path {path}: it runs only on nodes whose policy allows it (bind_mounts.allow)"
        )
    return (
        f"bind-mounts {path}, which reaches {what}; an agent refuses it unless its node's policy "
        "lists it in bind_mounts.allow"
    )
