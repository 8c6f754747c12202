"""compose's ``deploy:`` (swarm's keys, which docker compose partly honours) → replicas,
resources and restart; the rest is reported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phrame.compose.importing import values

if TYPE_CHECKING:
    from phrame.compose.importing.service import ServiceImport

_CONDITIONS = {"none": "no", "on-failure": "on-failure", "any": "always"}


def _limits(imp: ServiceImport, limits: dict[str, Any]) -> None:
    res = imp.out.setdefault("resources", {})
    for k, v in limits.items():
        try:
            if k == "cpus":
                res["cpus"] = values.cpus(v)
            elif k == "memory":
                res["memory"] = values.memory(v)
            else:
                imp.note(f"deploy.resources.limits.{k}", "only cpus and memory limits are in phrame's format")
        except values.Lossy as e:
            imp.note(f"deploy.resources.limits.{k}", str(e))
    if not res:
        imp.out.pop("resources")


def deploy(imp: ServiceImport, spec: dict[str, Any]) -> None:
    for key, value in spec.items():
        if key == "replicas":
            imp.out["replicas"] = int(value)
        elif key == "mode" and value == "replicated":
            continue
        elif key == "resources" and isinstance(value, dict):
            for part, limits in value.items():
                if part == "limits" and isinstance(limits, dict):
                    _limits(imp, limits)
                else:
                    imp.note(f"deploy.resources.{part}", "only limits are in phrame's format")
        elif key == "restart_policy" and isinstance(value, dict):
            cond = value.get("condition", "any")
            if "restart" not in imp.spec and cond in _CONDITIONS:
                imp.out["restart"] = _CONDITIONS[cond]
            for k in value:
                if k != "condition":
                    imp.note(
                        f"deploy.restart_policy.{k}",
                        "Docker's restart policy has no delay, window or attempt count here",
                    )
        elif key == "placement":
            imp.note(
                "deploy.placement", "swarm constraints have no equivalent: use --node, or placement labels"
            )
        elif key == "update_config":
            imp.note("deploy.update_config", "swarm's rolling update settings have no equivalent")
        else:
            imp.note(f"deploy.{key}", "not in phrame's service format")
