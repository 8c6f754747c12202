"""A preview's record, ``phrame/desired/environments/<env>-mr-<iid>/preview``
(schemas/json/desired-preview.schema.json), and the plan note's section about it.

Pure: the manager builds and reads these payloads; the note section is text. The record is
retained, so a restarted config-sync reads every live preview (and its auto-stop deadline)
back from the broker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from config_sync.previews.derive import PortKey
from phrame.config_repo.quantities import PortMapping

DEPLOYED, WAITING, FAILED = "deployed", "waiting-approval", "failed"


def addresses(
    node: str, mappings: Mapping[PortKey, PortMapping], ports: Mapping[PortKey, int]
) -> list[dict[str, Any]]:
    """The ``addresses`` field: each published mapping with the host port the preview got."""
    del node  # the record names the node once
    return [
        {
            "service": service,
            "index": index,
            "host_ip": mappings[(service, index)].host_ip,
            "host_port": ports[(service, index)],
            "container_port": mappings[(service, index)].container_port,
            "protocol": mappings[(service, index)].protocol,
        }
        for service, index in sorted(ports)
    ]


def previous_ports(record: Mapping[str, Any] | None) -> dict[PortKey, int]:
    """The host ports a preview had (kept on an update while still free)."""
    out: dict[PortKey, int] = {}
    for a in (record or {}).get("addresses") or []:
        if isinstance(a, dict) and isinstance(a.get("host_port"), int):
            out[(str(a.get("service")), int(a.get("index", 0)))] = a["host_port"]
    return out


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(ts))) if isinstance(ts, int | float) else "?"


def note_section(records: Sequence[Mapping[str, Any]], *, stopped: Sequence[str] = ()) -> str:
    """The plan note's ``Preview`` section for one merge request's previews."""
    if not records and not stopped:
        return ""
    lines = ["", "### Preview", ""]
    for r in sorted(records, key=lambda r: str(r.get("preview"))):
        name, state = r.get("preview"), r.get("state")
        commit = str(r.get("commit") or "")[:12]
        head = f"**{name}** ({state}" + (f", at {commit}" if commit else "") + ")"
        if r.get("gitlab_url"):
            head += f" · [GitLab environment {r.get('gitlab_environment')}]({r['gitlab_url']})"
        elif r.get("gitlab_environment"):
            head += f" · GitLab environment `{r['gitlab_environment']}`"
        lines.append(f"- {head}")
        if r.get("reason"):
            lines.append(f"  - {r['reason']}")
        if state == DEPLOYED:
            services = ", ".join(r.get("services") or [])
            lines.append(f"  - node `{r.get('node')}`, services: {services}")
            for a in r.get("addresses") or []:
                host = a.get("host_ip") or r.get("node")
                lines.append(
                    f"  - `{host}:{a['host_port']}` → {a['service']}:{a['container_port']}/{a['protocol']}"
                )
        lines.append(f"  - removed at {_when(r.get('stop_at'))} without an update, or when closed or merged")
    lines += [f"- **{name}** (stopped: this head no longer changes its environment)" for name in stopped]
    return "\n".join(lines) + "\n"
