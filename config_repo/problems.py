"""The one error shape every check produces: what, where (file:line:col, pointer), which rule."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class ConfigError(Exception):
    """Root exception of config_repo: the repository cannot be read at all (bad ref, no repo)."""


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    column: int
    rule: str
    message: str
    path: str = ""

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.rule}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
