"""Text in a compose service: variables resolved without any environment (see
``interpolation``), ``environment`` and ``labels`` (map or ``KEY=value`` list), and the
container fields that keep their compose names. Base of ``import_service.ServiceImport``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from phrame.compose.importing import values
from phrame.compose.interpolation import InterpolationError, resolve
from phrame.compose.models import Unsupported
from phrame.config_repo import container_fields


@dataclass
class Context:
    """What every service of the file shares."""

    services: Mapping[str, str]  # compose service -> phrame name (imported ones only)
    networks: Mapping[str, str]  # compose network -> phrame name
    volumes: Mapping[str, str]  # compose volume key -> Docker volume name
    secrets: Mapping[str, str]  # variable -> secret file (x-phrame.secrets of an export)
    fields: frozenset[str]  # service fields this version's format has
    error: Callable[[str, tuple[Any, ...]], Exception]  # message, path → ComposeError


@dataclass
class ServiceText:
    """One service's values read as text: variables resolved (or noted), env, labels and
    the fields that pass through."""

    name: str  # the compose name
    spec: Mapping[str, Any]
    ctx: Context
    out: dict[str, Any] = field(default_factory=dict)
    notes: list[Unsupported] = field(default_factory=list)

    def note(self, key: str, reason: str) -> None:
        self.notes.append(Unsupported(self.name, key, reason))

    def text(self, value: Any, key: str) -> str | None:
        """``value`` as text with variables resolved, or None (noted) when one has no default."""
        if not isinstance(value, str):
            return None if value is None else str(value)
        try:
            r = resolve(value)
        except InterpolationError as e:
            raise self.ctx.error(str(e), ("services", self.name, *key.split("."))) from None
        for var, default in r.defaults.items():
            self.note(
                key,
                f"${{{var}}} was given its written default {default!r}; compose's environment is not read",
            )
        if r.value is None:
            self.note(
                key,
                f"uses ${{{', '.join(r.missing)}}} with no default: left out "
                "(the importer's environment is never read)",
            )
        return r.value

    def deep(self, value: Any, key: str) -> Any:
        """``text`` through lists and mappings; None when any part is left out."""
        if isinstance(value, list):
            items = [self.deep(v, key) for v in value]
            return None if any(i is None for i in items) else items
        if isinstance(value, dict):
            pairs = {k: self.deep(v, f"{key}.{k}") for k, v in value.items()}
            return None if any(v is None for v in pairs.values()) else pairs
        return value if isinstance(value, bool | int | float) else self.text(value, key)

    def environment(self, value: Any) -> None:
        pairs = value.items() if isinstance(value, dict) else (split_env(str(e)) for e in value or [])
        env: dict[str, Any] = {}
        for k, v in pairs:
            key = f"environment.{k}"
            if k in RUNTIME_ENV:  # the agent sets these on every container, over env
                if "x-phrame" not in self.spec:  # an export writes them; say so for others
                    self.note(key, "set by the agent on every container (its own value wins); dropped")
                continue
            bare = self.bare(v, key)
            if v is None or bare is not None:
                var = bare or k
                file = self.ctx.secrets.get(var)
                if file is None:
                    file = var
                    self.note(
                        key,
                        f"comes from compose's environment ({var}); "
                        f"made a secret read on the node from PHRAME_SECRETS_DIR/{var}",
                    )
                env[k] = {"file": file}
                continue
            text = self.text(v, key) if isinstance(v, str) else v
            if text is not None:
                env[k] = text
        if env:
            self.out["env"] = env

    def bare(self, value: Any, key: str) -> str | None:
        if not isinstance(value, str) or "$" not in value:
            return None
        try:
            return resolve(value).bare
        except InterpolationError as e:
            raise self.ctx.error(str(e), ("services", self.name, *key.split("."))) from None

    def labels(self, value: Any) -> None:
        pairs = value.items() if isinstance(value, dict) else (split_env(str(e)) for e in value or [])
        labels = {}
        for k, v in pairs:
            if str(k).startswith("io.phrame."):
                self.note(f"labels.{k}", "io.phrame.* labels are the agent's own; dropped")
                continue
            text = self.text("" if v is None else v, f"labels.{k}")
            if text is not None:
                labels[str(k)] = text
        if labels:
            self.out["labels"] = labels

    def new_field(self, key: str, value: Any) -> None:
        v = self.deep(value, key)
        if v is None:
            return
        try:
            if key == "extra_hosts":
                v = values.extra_hosts(v)
            elif key == "ulimits":
                v = values.ulimits(v)
            elif key == "stop_signal" and str(v).isdigit():
                v = int(v)  # phrame takes a signal number as a number, a name as text
            elif key in ("user", "stop_signal"):
                v = str(v)
        except values.Lossy as e:
            self.note(key, str(e))
            return
        self.out[key] = v


# the optional container fields render writes: carried when the target supports them
NEW_FIELDS = frozenset(container_fields.FIELDS)


RUNTIME_ENV = frozenset(
    {"PHRAME_NODE", "PHRAME_ENVIRONMENT", "PHRAME_SERVICE", "PHRAME_REPLICA", "PHRAME_COMMIT"}
)


def split_env(entry: str) -> tuple[str, str | None]:
    key, sep, value = entry.partition("=")
    return key, (value if sep else None)
