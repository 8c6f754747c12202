"""Parsing the compact notations of the config format: memory sizes and compose port specs."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}  # fmt: skip
_MEMORY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$")


# Pure functions of one value, called for every service on every sync: memoized, so a
# long-running reader (config-sync) parses a value once (a failure is not cached: it raises).
_MEMO = 65536


@functools.lru_cache(maxsize=_MEMO, typed=True)
def memory_bytes(text: str) -> int:
    """``512Mi`` → 536870912. Raises ValueError on anything else."""
    m = _MEMORY.match(str(text))
    if not m:
        raise ValueError(f"invalid memory size {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


def format_bytes(n: float) -> str:
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if n >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:g}{unit}"
    return f"{n:g}"


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    protocol: str = "tcp"
    host_port: int | None = None
    host_ip: str | None = None

    def to_spec(self) -> dict[str, object]:
        return {
            "host_ip": self.host_ip,
            "host_port": self.host_port,
            "container_port": self.container_port,
            "protocol": self.protocol,
        }


def _range(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    first, last = int(lo), int(hi or lo)
    if not (1 <= first <= last <= 65535):
        raise ValueError(f"port range {text!r} is outside 1-65535 or reversed")
    return list(range(first, last + 1))


def parse_ports(spec: str | int) -> list[PortMapping]:
    """Compose short syntax: ``80``, ``8080:80``, ``127.0.0.1:8080:80/udp``, ``9000-9001:9000-9001``.

    Raises ValueError naming the spec when a port or range is invalid."""
    return list(_parse_ports(spec))


@functools.lru_cache(maxsize=_MEMO, typed=True)
def _parse_ports(spec: str | int) -> tuple[PortMapping, ...]:
    text = str(spec)
    text, _, proto = text.partition("/")
    proto = proto or "tcp"
    ip: str | None = None
    host = ""
    if ":" in text:
        rest, _, container = text.rpartition(":")
        if ":" in rest:
            ip, _, host = rest.rpartition(":")
            ip = ip.strip("[]") or None
        else:
            host = rest
    else:
        container = text
    containers = _range(container)
    if not host:
        return tuple(PortMapping(c, proto, None, ip) for c in containers)
    hosts = _range(host)
    if len(hosts) != len(containers):
        raise ValueError(f"port spec {spec!r}: host range and container range differ in length")
    return tuple(PortMapping(c, proto, h, ip) for h, c in zip(hosts, containers, strict=True))
