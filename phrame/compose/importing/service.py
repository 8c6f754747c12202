"""One compose service → the data of one phrame container service file.

Pure: records what it cannot carry as :class:`Unsupported` and never reads the importer's
environment (see ``interpolation``). The caller (``importing``) decides names, networks
and placement for the whole file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phrame.compose.importing import values
from phrame.compose.importing.deploy import deploy
from phrame.compose.importing.keys import IGNORED, NOT_SUPPORTED, WHY
from phrame.compose.importing.shapes import shape_problem
from phrame.compose.importing.text import NEW_FIELDS, ServiceText
from phrame.compose.yaml_writing import quoted


class ServiceImport(ServiceText):
    """Maps every key of one compose service (``run``); what it cannot carry goes to ``notes``."""

    def run(self) -> dict[str, Any]:
        for key, value in self.spec.items():
            if key.startswith("x-") or key in IGNORED:
                continue
            handler = getattr(self, f"_{key}", None)
            known = handler is not None or (key in self.ctx.fields and key in NEW_FIELDS)
            if known:
                self._mapped(key, value, handler)
            elif key in NOT_SUPPORTED or key in NEW_FIELDS:
                self.note(key, WHY.get(key, "not in phrame's service format"))
            else:
                self.note(key, "not a compose key phrame knows; left out")
        self.out.setdefault("restart", "no")  # compose's default; phrame's would be unless-stopped
        return self.out

    def _mapped(self, key: str, value: Any, handler: Any) -> None:
        """One key of the mapping, its shape checked first: compose refuses other shapes too,
        so a wrong one is an error with its line, never a traceback or an invalid file."""
        where = ("services", self.name, key)
        expected = shape_problem(key, value)
        if expected:
            raise self.ctx.error(f"service {self.name!r}: {key}: {expected}", where)
        try:
            if handler is not None:
                handler(value)
            else:
                self.new_field(key, value)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
            raise self.ctx.error(
                f"service {self.name!r}: {key}: cannot read {value!r} ({e})", where
            ) from None

    def _image(self, value: Any) -> None:
        image = self.text(value, "image")
        if image is not None:
            self.out["image"] = image

    def _command(self, value: Any, key: str = "command") -> None:
        v = self.deep(value, key)
        if v is not None and v != []:
            self.out[key] = v

    def _entrypoint(self, value: Any) -> None:
        self._command(value, "entrypoint")

    def _ports(self, value: Any) -> None:
        def port(p: Any, _where: str) -> Any:
            found = values.port(p)
            return quoted(found) if isinstance(found, str) else found

        self._each(value, "ports", port)

    def _volumes(self, value: Any) -> None:
        def volume(v: Any, where: str) -> str:
            text, dropped = values.volume(v, dict(self.ctx.volumes))
            if dropped:
                self.note(where, f"options {', '.join(map(str, dropped))} have no equivalent; dropped")
            return text

        self._each(value, "volumes", volume)

    def _each(self, value: Any, key: str, convert: Callable[[Any, str], Any]) -> None:
        """``key``'s list item by item: an item ``convert`` cannot carry (``values.Lossy``) is
        noted and left out, the rest kept in order; no list at all when nothing is left."""
        out = []
        for i, item in enumerate(value or []):
            where = f"{key}[{i}]"
            item = self.deep(item, where)
            if item is None:
                continue
            try:
                out.append(convert(item, where))
            except values.Lossy as e:
                self.note(where, f"{e}; left out")
        if out:
            self.out[key] = out

    def _networks(self, value: Any) -> None:
        names = list(value) if isinstance(value, dict | list) else []
        if isinstance(value, dict):
            for net, opts in value.items():
                for opt in opts if isinstance(opts, dict) else {}:
                    if opt == "aliases" and opts[opt] == [self.ctx.services.get(self.name)]:
                        continue  # an export's alias that keeps the service's own name
                    self.note(
                        f"networks.{net}.{opt}", "per-network options (aliases, addresses) have no equivalent"
                    )
        self.out["networks"] = [self.ctx.networks[str(n)] for n in names if str(n) in self.ctx.networks]

    def _network_mode(self, value: Any) -> None:
        if value == "bridge":
            self.out["networks"] = []  # Docker's default bridge, as a phrame service with no networks
        else:
            self.note(
                "network_mode", f"{value!r} has no equivalent: the container joins Docker's default bridge"
            )
            self.out["networks"] = []

    def _healthcheck(self, value: Any) -> None:
        if not isinstance(value, dict):
            return
        if value.get("disable") or (isinstance(value.get("test"), list) and value["test"][:1] == ["NONE"]):
            self.note(
                "healthcheck",
                "disabling the image's health check has no equivalent; the image's own check runs",
            )
            return
        hc: dict[str, Any] = {}
        for k, v in value.items():
            if k in ("test", "interval", "timeout", "start_period", "retries"):
                v = self.deep(v, f"healthcheck.{k}")
                if v is not None:
                    hc[k] = v
            else:
                self.note(f"healthcheck.{k}", "not in phrame's health check; dropped")
        if "test" in hc:
            self.out["healthcheck"] = hc

    def _restart(self, value: Any) -> None:
        try:
            policy, dropped = values.restart(self.text(value, "restart") if value is not False else False)
        except values.Lossy as e:
            self.note("restart", str(e))
            return
        self.out["restart"] = policy
        if dropped:
            self.note("restart", dropped)

    def _depends_on(self, value: Any) -> None:
        deps = []
        for dep in value or []:
            cond = (
                value[dep].get("condition")
                if isinstance(value, dict) and isinstance(value[dep], dict)
                else None
            )
            if cond == "service_completed_successfully":
                self.note(
                    f"depends_on.{dep}",
                    "phrame waits for a dependency to run (and be healthy), not to complete",
                )
            if str(dep) not in self.ctx.services:
                self.note(f"depends_on.{dep}", f"{dep} is not imported; the dependency is dropped")
                continue
            deps.append(self.ctx.services[str(dep)])
        if deps:
            self.out["depends_on"] = deps

    def _environment(self, value: Any) -> None:
        self.environment(value)

    def _labels(self, value: Any) -> None:
        self.labels(value)

    def _scale(self, value: Any) -> None:
        self.out["replicas"] = int(value)

    def _pull_policy(self, value: Any) -> None:
        if value == "always":
            self.out["pull"] = "always"
        elif value not in ("missing", "if_not_present"):
            self.note("pull_policy", f"{value!r} has no equivalent; phrame pulls a missing image")

    def _cpus(self, value: Any) -> None:
        try:
            self.out.setdefault("resources", {})["cpus"] = values.cpus(value)
        except values.Lossy as e:
            self.note("cpus", str(e))

    def _mem_limit(self, value: Any) -> None:
        try:
            self.out.setdefault("resources", {})["memory"] = values.memory(value)
        except values.Lossy as e:
            self.note("mem_limit", str(e))

    def _deploy(self, value: Any) -> None:
        deploy(self, value if isinstance(value, dict) else {})
