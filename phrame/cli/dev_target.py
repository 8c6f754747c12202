"""The dev stack as the target of the commands a person runs beside it.

``phrame status``, ``phrame promote`` and ``phrame replay`` call these: when no setting or
option of theirs says where to go, a dev stack's ``stack.json`` (in ``PHRAME_DEV_STATE_DIR``,
else ``.phrame-dev`` in the current folder) gives its ports, its read-only broker account
and its webhook secret, so a stack on other ports than the defaults is found too. Reads
only; an explicit setting always wins.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from dev_stack.credentials import STATUS_ACCOUNT, password_file
from dev_stack.settings import DEFAULT_STATE_DIR, DevSettings

STATE_DIR_SETTING = "PHRAME_DEV_STATE_DIR"
# any of these says which broker, or how to log in: the dev stack is then not guessed
MQTT_SETTINGS = (
    "PHRAME_DESIRED_MQTT_URL",
    "PHRAME_ACTUAL_MQTT_URL",
    "PHRAME_MQTT_USERNAME",
    "PHRAME_MQTT_PASSWORD",
    "PHRAME_MQTT_PASSWORD_FILE",
    "PHRAME_OAUTH2_TOKEN_URL",
)


class NoDevStack(ValueError):
    """``PHRAME_DEV_STATE_DIR`` names a folder with no dev stack in it."""


def dev_stack(environ: Mapping[str, str] | None = None) -> DevSettings | None:
    """The dev stack of ``PHRAME_DEV_STATE_DIR`` (which must hold one) or of ``./.phrame-dev``."""
    environ = os.environ if environ is None else environ
    named = environ.get(STATE_DIR_SETTING)
    stack = DevSettings.load(Path(named or DEFAULT_STATE_DIR))
    if named and stack is None:
        raise NoDevStack(f"{STATE_DIR_SETTING}={named}: no dev stack there (its stack.json is missing)")
    return stack


def mqtt_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` with the dev stack's broker and ``observer`` login added, unless a setting
    already chooses the broker or the login (or there is no dev stack)."""
    env = dict(os.environ if environ is None else environ)
    if any(env.get(name) for name in MQTT_SETTINGS):
        return env
    stack = dev_stack(env)
    if stack is None:
        return env
    env["PHRAME_DESIRED_MQTT_URL"] = stack.broker_url
    secret = password_file(stack, STATUS_ACCOUNT)
    if secret.exists():  # a stack started before its broker had accounts has none
        env |= {"PHRAME_MQTT_USERNAME": STATUS_ACCOUNT, "PHRAME_MQTT_PASSWORD_FILE": str(secret)}
    return env


def config_sync(url: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, Path | None]:
    """(config-sync's base URL, the dev stack's webhook secret file when the URL is its).

    ``url`` (an option) wins, then ``PHRAME_LISTEN``, then the dev stack, then the default."""
    environ = os.environ if environ is None else environ
    stack = dev_stack(environ)
    if url:
        base = url.rstrip("/")
    elif environ.get("PHRAME_LISTEN"):
        base = f"http://{environ['PHRAME_LISTEN']}"
    elif stack is not None:
        base = stack.config_sync_url
    else:
        base = "http://127.0.0.1:8080"
    return base, secret_for(base, stack)


def secret_for(url: str, stack: DevSettings | None) -> Path | None:
    """The dev stack's webhook secret file when ``url`` is on its config-sync, else None:
    the secret never goes to another server."""
    if stack is None or not stack.secret_file.exists():
        return None
    ours, theirs = urlsplit(stack.config_sync_url), urlsplit(url)
    return stack.secret_file if (ours.scheme, ours.netloc) == (theirs.scheme, theirs.netloc) else None
