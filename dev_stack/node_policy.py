"""The node policy of the dev stack's agents: what a commit may ask of this machine.

Written into the state folder at every start (:func:`write_policy`) and handed to each
agent as ``PHRAME_POLICY_FILE``, unless the caller's environment names a policy file of its
own. It allows what the quickstart sample needs and no more: host processes, run as the
user who started the stack (the sample's ``ticker``; root only when that user is root).
No host bind mounts, no port on every interface: the agents' defaults.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from dev_stack.files import write_private
from dev_stack.settings import DevSettings


def policy_text(user: str | None = None) -> str:
    who = user or pwd.getpwuid(os.geteuid()).pw_name
    return (
        "# written by phrame dev at every start: what this stack's agents allow a commit\n"
        "# (docs/operations/security.md, Node policy). Set PHRAME_POLICY_FILE to use your own.\n"
        f"processes: {{allowed: true, users: [{who}]}}  # the quickstart's host process runs as you\n"
    )


def policy_path(settings: DevSettings) -> Path:
    return settings.state_dir / "policy.yaml"


def write_policy(settings: DevSettings) -> Path:
    path = policy_path(settings)
    write_private(path, policy_text())
    return path
