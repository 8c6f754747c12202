"""The dev stack's broker accounts: a new password for each at every start, production's ACL.

The supervisor calls :func:`write_credentials` once per start, before the broker starts
(never again while the parts run: they read their passwords once); :mod:`dev_stack.parts`
gives each child its account (user name and password file in its environment) and
``phrame status`` reads ``observer``'s. The accounts and grants are production's
(:func:`phrame.mqtt.broker_config.acl_text`) plus read-only ones that only one machine
needs: ``operator`` for a person's ``mosquitto_sub`` and ``phrame-dev`` for the
supervisor's own watch, so neither takes ``observer``'s connection away from ``phrame status``
(the broker makes the user name the client id). Passwords are never printed or put on a
command line; the files are the owner's alone (0600 in a 0700 folder).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

from dev_stack.files import write_private
from dev_stack.settings import DevSettings
from phrame.mqtt.broker_config import SERVICE_ACCOUNTS, acl_text, node_account
from phrame.settings.state import private_dir

#: read-only accounts of the dev stack beside production's ``observer``
READERS = ("operator", "phrame-dev")
STATUS_ACCOUNT = "observer"  # phrame status, as in production
PERSON_ACCOUNT = "operator"
SUPERVISOR_ACCOUNT = "phrame-dev"
PBKDF2_ITERATIONS = 101  # mosquitto_passwd's own choice for its $7$ (PBKDF2-SHA512) hashes


def accounts(settings: DevSettings) -> list[str]:
    return [*SERVICE_ACCOUNTS, *READERS, *(node_account(n) for n in settings.nodes)]


def password_file(settings: DevSettings, account: str) -> Path:
    return settings.credentials_dir / account


def dev_acl(nodes: tuple[str, ...] | list[str]) -> str:
    """Production's ACL for these nodes, then :data:`READERS` with ``observer``'s grants."""
    lines = [acl_text(list(nodes))]
    for reader in READERS:
        grants = [
            f"topic {access} {pattern.format(p='phrame')}" for access, pattern in SERVICE_ACCOUNTS["observer"]
        ]
        lines.append("\n".join(["", f"user {reader}", *grants]) + "\n")
    return "".join(lines)


def mosquitto_hash(password: str, salt: bytes | None = None) -> str:
    """The password file's hash of ``password``, as ``mosquitto_passwd`` writes it (``$7$``)."""
    salt = salt if salt is not None else secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ITERATIONS)
    return f"$7${PBKDF2_ITERATIONS}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def write_credentials(settings: DevSettings) -> None:
    """A new password for every account (one file each), the broker's ``passwd`` and ``acl``."""
    private_dir(settings.credentials_dir)
    private_dir(settings.broker_dir)
    hashed = []
    for account in accounts(settings):
        password = secrets.token_urlsafe(24)
        write_private(password_file(settings, account), password + "\n")
        hashed.append(f"{account}:{mosquitto_hash(password)}\n")
    write_private(settings.broker_dir / "passwd", "".join(hashed))
    write_private(settings.broker_dir / "acl", dev_acl(settings.nodes))
