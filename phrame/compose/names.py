"""Names across the two formats: compose allows ``[a-zA-Z0-9._-]``, phrame
``^[a-z0-9][a-z0-9-]{0,62}$``. Both directions keep names unique within a file."""

from __future__ import annotations

import re

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def phrame_name(text: str) -> str:
    """``Redis_DB.1`` → ``redis-db-1``; ``x`` when nothing usable is left."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)[:63].strip("-")
    return name or "x"


def unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... (cut to 63 characters) when taken; marks it taken."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        suffix = f"-{n}"
        candidate = name[: 63 - len(suffix)] + suffix
    taken.add(candidate)
    return candidate


def env_var_name(text: str) -> str:
    """A compose variable name for a secret file name: ``egress/cdn.token`` → ``EGRESS_CDN_TOKEN``."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()
    return name if name and not name[0].isdigit() else f"SECRET_{name}"
