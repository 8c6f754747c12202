"""The last lines of a failing container, carried in its actual item (``logs``).

:class:`node_agent.reporting.ActualReporter` asks :class:`LogTails` for a container's tail
while the container is down, unhealthy or was started again after an exit (a crash loop):
what a person needs first to see why. Bounded (:data:`MAX_LINES`, :data:`MAX_BYTES`) and
read from Docker once per change of the container (state, health, exit, restart), never on
each report. Secret values of the item's environment are masked before anything leaves.
:mod:`node_agent.log_commands` reads a tail on request with the same masking and bounds of
its own. Never logs a line itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from node_agent.errors import DockerError
from node_agent.sops_secrets import SopsSecrets

MAX_LINES = 50
MAX_BYTES = 8 * 1024
MASK = "***"
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary words
#: env names whose plain values are masked too, as with values read from secret files
SECRET_NAME = re.compile(r"(PASSW(OR)?D|SECRET|TOKEN|API_?KEY|PRIVATE|CREDENTIAL)", re.IGNORECASE)
Tail = Callable[[str, int], bytes]  # (container id, lines) -> Docker's log tail


def wants_logs(payload: Mapping[str, Any]) -> bool:
    """Whether the item's report carries its log tail: down, unhealthy or crash-looping."""
    return (
        payload.get("state") not in ("running", "created", "missing")
        or payload.get("health") == "unhealthy"
        or bool(payload.get("last_exit"))
    )


def masked(text: str, secrets: Iterable[str]) -> str:
    for value in sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def tail_doc(
    raw: bytes, secrets: Iterable[str] = (), *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> dict[str, Any]:
    """``{"lines": [...], "truncated": bool}``: the last lines of ``raw``, secrets masked,
    at most ``max_lines`` lines and ``max_bytes`` bytes (the oldest go first; a single
    longer line keeps its end)."""
    text = masked(raw.decode("utf-8", "replace"), secrets)
    lines = text.splitlines()
    truncated = len(lines) > max_lines
    lines = lines[-max_lines:]
    while lines and sum(len(line.encode()) + 1 for line in lines) > max_bytes:
        if len(lines) == 1:
            lines = [lines[0].encode()[-(max_bytes - 1) :].decode("utf-8", "ignore")]
        else:
            lines = lines[1:]
        truncated = True
    return {"lines": lines, "truncated": truncated}


def secret_values(
    spec: Mapping[str, Any] | None, read_file: Callable[[str], str], sops: SopsSecrets | None = None
) -> list[str]:
    """The values to mask for an item of ``spec``: its ``{file: NAME}`` env values (read
    with ``read_file``; one that cannot be read masks nothing), its ``{secret: file/key}``
    values (decrypted by ``sops``; likewise) and plain values of env names that say they
    hold a secret."""
    env = (spec or {}).get("env")
    found: list[str] = []
    for name, value in env.items() if isinstance(env, Mapping) else ():
        if isinstance(value, Mapping) and value.get("secret") and sops is not None:
            try:
                found.append(sops.value((spec or {}).get("secrets"), str(value["secret"])).strip())
            except Exception:
                continue
        elif isinstance(value, Mapping) and value.get("file"):
            try:
                found.append(read_file(str(value["file"])).strip())
            except Exception:
                continue
        elif isinstance(value, str) and SECRET_NAME.search(str(name)):
            found.append(value)
    return found


class LogTails:
    """Docker's log tail per container, fetched again only when ``key`` changes."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        self._held: dict[str, tuple[object, dict[str, Any]]] = {}

    def of(
        self, container_id: str, key: object, secrets: Callable[[], Iterable[str]]
    ) -> dict[str, Any] | None:
        held = self._held.get(container_id)
        if held is not None and held[0] == key:
            return held[1]
        try:
            doc = tail_doc(self.tail(container_id, MAX_LINES), secrets())
        except DockerError:  # gone meanwhile, or Docker away: the next report tries again
            return None
        self._held[container_id] = (key, doc)
        return doc

    def keep_only(self, alive: Iterable[str]) -> None:
        keep = set(alive)
        for cid in [c for c in self._held if c not in keep]:
            del self._held[cid]
