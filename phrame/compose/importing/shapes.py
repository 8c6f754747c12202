"""The shape compose itself requires of each service key it maps (its JSON schema's
types), checked before a value is read: a list where a mapping belongs is the file's
error, reported with its line, not something to guess at."""

from __future__ import annotations

from typing import Any

_SCALAR = (str, int, float)
_ARGV = "a string or a list of strings"
# key -> (allowed types, what to say)
_SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    "image": ((str,), "a string"),
    "command": ((str, list), _ARGV),
    "entrypoint": ((str, list), _ARGV),
    "environment": ((dict, list), "a mapping or a list of KEY=value"),
    "labels": ((dict, list), "a mapping or a list of key=value"),
    "ports": ((list,), "a list"),
    "volumes": ((list,), "a list"),
    "networks": ((dict, list), "a list or a mapping"),
    "depends_on": ((dict, list), "a list or a mapping"),
    "healthcheck": ((dict,), "a mapping"),
    "restart": ((str,), "a string"),
    "deploy": ((dict,), "a mapping"),
    "scale": ((int,), "an integer"),
    "cpus": (_SCALAR, "a number"),
    "mem_limit": (_SCALAR, "a size such as 512m"),
    "network_mode": ((str,), "a string"),
    "pull_policy": ((str,), "a string"),
    "stop_signal": ((str, int), "a signal name or number"),
    "stop_grace_period": ((str,), "a duration such as 10s"),
    "user": ((str, int), "a user name or number"),
    "working_dir": ((str,), "a path"),
    "hostname": ((str,), "a host name"),
    "extra_hosts": ((dict, list), "a list of host:address or a mapping"),
    "ulimits": ((dict,), "a mapping"),
    "logging": ((dict,), "a mapping"),
}
# keys whose list items (or mapping values) must be scalars
_SCALAR_ITEMS = {"command", "entrypoint", "environment", "labels", "extra_hosts", "depends_on"}


def _kind(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }
    return names.get(type(value), type(value).__name__) if value is not None else "empty"


def shape_problem(key: str, value: Any) -> str | None:
    """Why ``value`` is not what compose allows for ``key``, or None."""
    if key == "restart" and value is False:  # YAML 1.1's `restart: no`
        return None
    allowed, what = _SHAPES.get(key, ((object,), ""))
    if isinstance(value, bool) or not isinstance(value, allowed):
        return f"expected {what}, got {_kind(value)}"
    if key not in _SCALAR_ITEMS or (key == "depends_on" and isinstance(value, dict)):
        return None  # depends_on's long form maps each service to its options
    for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        if isinstance(value, dict) and (item is None or isinstance(item, bool)):
            continue  # `KEY:` (from the environment) and `DEBUG: true` are compose's too
        if isinstance(item, bool) or not isinstance(item, _SCALAR):
            return f"expected {what}, got {_kind(value)} holding {_kind(item)}"
    return None
