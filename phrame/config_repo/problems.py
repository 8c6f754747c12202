"""The one error shape every check produces: what, where (file:line:col, pointer), which rule.

A problem is printed to terminals and published as UTF-8 JSON, so what it quotes from a
file (a key, a value, a file name) never carries a control character or a lone surrogate:
those are escaped as it is made, whichever check made it, and a message quoting a huge
value is shortened in the middle (the end says what is wrong).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

# a message quotes values: one quoting a 1 MiB value must not be a 1 MiB line (a listed
# dependency cycle of a thousand services still fits)
MAX_MESSAGE_CHARS = 10_000
# YAML 1.2's printable characters (what its reader accepts raw); everything else is no text
NOT_TEXT = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def escape_non_text(text: str) -> str:
    """``text`` with every character that is no text written as a Python escape."""
    return NOT_TEXT.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class ConfigError(Exception):
    """Root exception of phrame.config_repo: the repository cannot be read at all (bad ref, no repo)."""


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    column: int
    rule: str
    message: str
    path: str = ""

    def __post_init__(self) -> None:
        for f in ("file", "message", "path"):
            value = getattr(self, f)
            if NOT_TEXT.search(value):
                object.__setattr__(self, f, escape_non_text(value))
        if len(self.message) > MAX_MESSAGE_CHARS:
            keep = (MAX_MESSAGE_CHARS - 1) // 2
            object.__setattr__(self, "message", self.message[:keep] + "…" + self.message[-keep:])

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.rule}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
