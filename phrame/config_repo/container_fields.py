"""The optional container fields that compose users bring (stop signal and grace, user,
working directory, host name, extra hosts, ulimits, logging), as render writes them.

Called by ``render.container_spec``. A field is written only when the service or its
environment's ``defaults`` sets it: an absent field must leave the payload (and its
digest) byte for byte as before these fields existed, or every container of every
existing repository would be recreated on upgrade. Pure; the schema has checked values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# in the order they are written into the payload
FIELDS = (
    "stop_signal",
    "stop_grace_period",
    "user",
    "working_dir",
    "hostname",
    "extra_hosts",
    "ulimits",
    "logging",
)
# the environment's ``defaults`` may set these; a service's own value replaces it whole
DEFAULTABLE = frozenset({"stop_signal", "stop_grace_period", "ulimits", "logging"})


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _ulimits(value: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``nofile: 1024`` is soft and hard alike: the payload always holds both."""
    out = {}
    for name, limit in sorted(value.items()):
        if isinstance(limit, Mapping):
            out[name] = {"soft": int(limit["soft"]), "hard": int(limit["hard"])}
        else:
            out[name] = {"soft": int(limit), "hard": int(limit)}
    return out


def _logging(value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"driver": str(value["driver"])}
    options = value.get("options")
    if options:
        out["options"] = {str(k): _text(v) for k, v in sorted(options.items())}
    return out


def container_fields(declared: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of :data:`FIELDS` that ``declared`` (a container service) or ``defaults``
    (its environment's) set, in payload form; empty when none is set."""
    out: dict[str, Any] = {}
    for key in FIELDS:
        value = declared.get(key)
        if value is None and key in DEFAULTABLE:
            value = defaults.get(key)
        if value is None:
            continue
        if key == "extra_hosts":
            value = {str(host): str(ip) for host, ip in sorted(value.items())}
        elif key == "ulimits":
            value = _ulimits(value)
        elif key == "logging":
            value = _logging(value)
        out[key] = value
    return out
