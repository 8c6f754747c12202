"""compose's top-level ``networks:`` and ``volumes:`` → phrame network files and the
Docker names of named volumes."""

from __future__ import annotations

from typing import Any

from phrame.compose.models import ImportResult, Unsupported

_DRIVERS = {"bridge", "macvlan", "ipvlan", "overlay"}


def network_file(name: str, compose_name: str, spec: Any, result: ImportResult) -> dict[str, Any]:
    def note(key: str, reason: str) -> None:
        result.unsupported.append(Unsupported("", f"networks.{compose_name}.{key}", reason))

    out: dict[str, Any] = {"name": name, "driver": "bridge"}
    for key, value in (spec or {}).items() if isinstance(spec, dict) else ():
        if key == "driver":
            if value in _DRIVERS:
                out["driver"] = value
            else:
                note(key, f"driver {value!r} is not one of {', '.join(sorted(_DRIVERS))}; bridge used")
        elif key == "internal":
            out["internal"] = bool(value)
        elif key == "labels":
            items = value if isinstance(value, list) else []
            labels = (
                dict(value) if isinstance(value, dict) else dict(str(v).partition("=")[::2] for v in items)
            )
            if not isinstance(value, dict | list):
                note(key, f"expected a mapping or a list of key=value, got {value!r}; dropped")
            for k in [k for k in labels if str(k).startswith("io.phrame.")]:
                note(f"labels.{k}", "io.phrame.* labels are the agent's own; dropped")
                del labels[k]
            if labels:
                out["labels"] = {str(k): str(v) for k, v in labels.items()}
        elif key == "ipam" and isinstance(value, dict):
            configs: list[Any] = value["config"] if isinstance(value.get("config"), list) else []
            if configs and isinstance(configs[0], dict) and configs[0].get("subnet"):
                out["subnet"] = str(configs[0]["subnet"])
            extra = [k for c in configs if isinstance(c, dict) for k in c if k != "subnet"]
            if len(configs) > 1 or extra or set(value) - {"config"}:
                note("ipam", "only the first config's subnet is carried (no gateway, ranges, driver)")
        elif key == "external":
            if value:
                note(
                    key, f"phrame creates its own network <env>.{name}; an existing network cannot be joined"
                )
        elif not str(key).startswith("x-"):
            note(key, "not in phrame's network format")
    return out


def volume_names(volumes: dict[str, Any], result: ImportResult) -> dict[str, str]:
    """compose volume key → Docker volume name (``name:`` when set, else the key: phrame does
    not add compose's ``<project>_`` prefix)."""
    out = {}
    for key, spec in volumes.items():
        out[str(key)] = str(key)
        for opt, value in (spec or {}).items() if isinstance(spec, dict) else ():
            if opt == "name":
                out[str(key)] = str(value)
            elif opt == "external":
                continue  # Docker creates a missing named volume; an existing one is used as is
            elif not str(opt).startswith("x-"):
                result.unsupported.append(
                    Unsupported(
                        "",
                        f"volumes.{key}.{opt}",
                        "volume options have no equivalent; Docker's local driver is used",
                    )
                )
    return out
