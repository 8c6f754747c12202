"""The dev nodes' age keys and the quickstart's one SOPS secret.

Each node's private key is ``<state>/age/<node>.key`` (0600, in a 0700 folder), made once and
kept across starts; its agent reads it as ``PHRAME_AGE_KEY_FILE``. The recipients go into
the sample's ``nodes/<node>.yaml``; the sample's ``secrets/page.sops.yaml`` is encrypted
for them by the ``sops`` binary (docs/operations/secrets.md).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import yaml

from dev_stack.settings import DevSettings
from phrame.settings.state import private_dir
from phrame.sops import keys, tool


def key_file(settings: DevSettings, node: str) -> Path:
    return settings.state_dir / "age" / f"{node}.key"


def ensure(settings: DevSettings) -> dict[str, str]:
    """node -> its age recipient, making the keys that are missing."""
    private_dir(settings.state_dir / "age")
    return {node: keys.ensure(key_file(settings, node)) for node in settings.nodes}


def sample_secret(recipients: dict[str, str]) -> str:
    """The sample's SOPS file: a random page token, encrypted for every dev node."""
    with tool.private_dir() as tmp:
        plain = tmp / "page.yaml"
        plain.write_text(yaml.safe_dump({"token": secrets.token_urlsafe(18)}), encoding="utf-8")
        return tool.encrypt(plain, recipients.values())
