"""Converting compose's value notations to phrame's: ports, volumes, memory, restart,
extra hosts, ulimits. Each returns the phrame value, or raises :class:`Lossy` with why
(the caller records it as unsupported)."""

from __future__ import annotations

import re
from typing import Any

from phrame.config_repo.quantities import parse_ports

_MEMORY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([bkmgBKMG])?[bB]?$")
_PHRAME_UNIT = {"b": "", "k": "Ki", "m": "Mi", "g": "Gi"}  # compose's units are binary
_MODES = {"ro", "rw", "z", "Z"}
_RESTARTS = {"no", "always", "on-failure", "unless-stopped"}


class Lossy(ValueError):
    """A value phrame cannot hold as written; the message says why."""


def memory(value: Any) -> str:
    m = _MEMORY.match(str(value).strip())
    if not m:
        raise Lossy(f"{value!r} is no memory size compose or phrame reads")
    number, unit = m.group(1), (m.group(2) or "b").lower()
    return f"{number}{_PHRAME_UNIT[unit]}"


def cpus(value: Any) -> float | int:
    try:
        n = float(value)
    except (TypeError, ValueError):
        raise Lossy(f"{value!r} is no number of CPUs") from None
    if not 0.01 <= n <= 1024:
        raise Lossy(f"{n} CPUs is outside phrame's 0.01-1024")
    return int(n) if n == int(n) else n


def port(value: Any) -> str | int:
    """Short syntax kept as is (checked); the long syntax made short."""
    if isinstance(value, dict):
        if "target" not in value:
            raise Lossy("a port without target")
        text = str(value["target"])
        published = value.get("published")
        ip = value.get("host_ip")
        if ip:
            text = f"{ip}:{published or ''}:{text}"
        elif published not in (None, ""):
            text = f"{published}:{text}"
        if value.get("protocol", "tcp") != "tcp":
            text = f"{text}/{value['protocol']}"
        value = text
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Lossy(f"{value!r} is no port")
    try:
        parse_ports(value)
    except ValueError as e:
        raise Lossy(str(e)) from None
    return value


def _mode(modes: list[str]) -> tuple[str, list[str]]:
    """The phrame MODE for compose's options, and the options it drops."""
    dropped = [m for m in modes if m not in _MODES]
    label = next((m for m in modes if m in ("z", "Z")), "")
    ro = "ro" in modes
    mode = ",".join(x for x in ("ro" if ro else "", label) if x)
    return mode or ("rw" if "rw" in modes else ""), dropped


def volume(value: Any, named: dict[str, str]) -> tuple[str, list[str]]:
    """``SOURCE:/target[:MODE]`` and the options left out; ``named`` maps a compose volume
    key to the Docker volume name it stands for."""
    if isinstance(value, dict):
        kind = value.get("type", "volume")
        if kind not in ("bind", "volume"):
            raise Lossy(f"a {kind} mount has no equivalent (host paths and named volumes only)")
        source, target = value.get("source"), value.get("target")
        modes = ["ro"] if value.get("read_only") else []
        extra = [k for k in value if k not in ("type", "source", "target", "read_only")]
        text = f"{source}:{target}" if source else str(target)
    else:
        text, extra = str(value), []
        parts = text.split(":")
        if len(parts) > 3:
            raise Lossy(f"{text!r} has more parts than SOURCE:TARGET:MODE")
        source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        modes = parts[2].split(",") if len(parts) == 3 else []
    if not source:
        raise Lossy(f"an anonymous volume ({target}) has no equivalent: name a volume or a host path")
    if str(source).startswith((".", "~")):
        raise Lossy(f"{source} is relative to the compose file; phrame needs an absolute path on the node")
    if not str(target).startswith("/"):
        raise Lossy(f"container path {target!r} is not absolute")
    if not str(source).startswith("/"):
        source = named.get(str(source), str(source))
    mode, dropped = _mode(modes)
    out = f"{source}:{target}" + (f":{mode}" if mode else "")
    return out, dropped + extra


def restart(value: Any) -> tuple[str, str | None]:
    """The policy, and what was dropped (``on-failure:3``'s count)."""
    text = "no" if value is False else str(value)
    policy, _, count = text.partition(":")
    if policy not in _RESTARTS:
        raise Lossy(f"{text!r} is no restart policy")
    return policy, (f"the retry count {count} of {text!r} is dropped" if count else None)


def extra_hosts(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out = {}
    for entry in value or []:
        text = str(entry)
        sep = "=" if "=" in text else ":"  # host:ip (an IPv6 ip has colons: split at the first)
        host, _, ip = text.partition(sep)
        out[host] = ip.strip("[]")
    return out


def ulimits(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Lossy("ulimits is no mapping")
    return {str(k): (dict(v) if isinstance(v, dict) else v) for k, v in value.items()}
