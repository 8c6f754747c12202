"""What an import returns, and the one error of this package."""

from __future__ import annotations

from dataclasses import dataclass, field


class ComposeError(Exception):
    """A compose file that cannot be read: what and where (1-based line and column)."""

    def __init__(self, message: str, *, line: int = 1, column: int = 1) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.message, self.line, self.column = message, line, column


@dataclass(frozen=True)
class Unsupported:
    """A compose feature with no phrame equivalent (or mapped with a change of meaning):
    ``service`` is empty for a top-level key; ``key`` is a dotted path such as ``deploy.placement``."""

    service: str
    key: str
    reason: str

    def format(self) -> str:
        where = f"{self.service}: " if self.service else ""
        return f"{where}{self.key}: {self.reason}"


@dataclass(frozen=True)
class Dangerous:
    """A setting the import keeps that gives the service power over its host (a bind mount
    of a host path, a port on every interface, root): for the reviewer, and for the node
    policy, which refuses it unless the node allows it."""

    service: str
    key: str
    reason: str

    def format(self) -> str:
        return f"{self.service}: {self.key}: {self.reason}"


@dataclass
class ImportResult:
    files: dict[str, str] = field(default_factory=dict)  # repo-relative path -> YAML text
    unsupported: list[Unsupported] = field(default_factory=list)
    dangerous: list[Dangerous] = field(default_factory=list)
