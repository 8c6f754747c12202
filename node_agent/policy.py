"""The node's own policy: read from its file at start, and how this host answers its checks.

``AgentSettings.from_env`` calls :func:`read_policy` once; a file that is unreadable or
invalid stops the agent with the file and the reason, so it never runs on half a policy.
The reconciler checks each desired item with :func:`item_violations` before acting on it.
The check itself is ``schemas.node_policy`` (the same one ``phrame validate`` runs).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from node_agent.errors import SettingsError
from phrame.config_repo.yaml_reading import parse_json, parse_yaml
from schemas import PayloadError, check_payload
from schemas.node_policy import HostLookups, NodePolicy, as_error, normal, violations

DEFAULT_POLICY_FILE = Path("/etc/phrame/policy.yaml")
MAX_POLICY_BYTES = 64 * 1024
# fields of the status's policy object that the agent fills in; a file cannot set them
_STATUS_ONLY = (("file",), ("bind_mounts", "protected"), ("processes", "agent_user"))


def read_policy(
    path: Path | None, *, guarding: tuple[Path, ...] = (), default: Path = DEFAULT_POLICY_FILE
) -> NodePolicy:
    """The policy in ``path`` (None: ``default``, whose absence means the defaults; a file
    named on purpose must exist). ``guarding``: the agent's own folders (state, secrets),
    protected with the file itself: a container that could write them could make the agent
    run what it likes (lifted, as the built-in ones, only by listing them in ``allow``)."""
    file = path or default
    try:
        raw = file.read_bytes() if file.stat().st_size <= MAX_POLICY_BYTES else None
    except FileNotFoundError:
        if path is not None:
            raise SettingsError(f"PHRAME_POLICY_FILE={path}: no such file") from None
        raw, file_name = b"", None
    except OSError as e:
        raise SettingsError(f"policy file {file}: cannot read it: {e.strerror or e}") from None
    else:
        file_name = str(file)
        if raw is None:
            raise SettingsError(f"policy file {file}: larger than {MAX_POLICY_BYTES} bytes")
    doc = _parse(file, raw) if file_name else {}
    policy = NodePolicy.from_doc(doc, file=file_name)
    own = [normal(str(p)) for p in (*guarding, file) if str(p)]
    return replace(
        policy,
        protected=tuple(dict.fromkeys((*policy.protected, *own))),
        agent_user=_user_name(os.geteuid()),
    )


def _parse(file: Path, raw: bytes) -> dict[str, Any]:
    parse = parse_json if file.suffix == ".json" else parse_yaml
    doc, problems = parse(str(file), raw)
    if problems or doc is None:
        p = problems[0] if problems else None
        where = f"{file}:{p.line}:{p.column}" if p else str(file)
        raise SettingsError(f"policy file {where}: {p.message if p else 'unreadable'}")
    data = {} if doc.data is None else doc.data
    if not isinstance(data, dict):
        raise SettingsError(f"policy file {file}: expected a mapping of bind_mounts, processes, ports")
    for path in _STATUS_ONLY:
        inner: Any = data
        for part in path[:-1]:
            inner = inner.get(part) if isinstance(inner, dict) else None
        if isinstance(inner, dict) and path[-1] in inner:
            line, column = doc.position(list(path), key=True)
            raise SettingsError(
                f"policy file {file}:{line}:{column}: {'.'.join(path)} is set by the agent, not the file"
            )
    try:
        check_payload("node-policy", data)
    except PayloadError as e:
        pointer, message = e.errors[0]
        parts = [int(x) if x.isdigit() else x for x in pointer.strip("/").split("/") if x]
        line, column = doc.position(parts)
        raise SettingsError(f"policy file {file}:{line}:{column}: {pointer or '/'}: {message}") from None
    return data


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _uid_of(user: str) -> int | None:
    name = user.split(":", 1)[0]
    if name.isdigit():
        return int(name)
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


#: this host's answers: links followed as Docker follows them, users as Popen looks them up
HOST = HostLookups(resolve=os.path.realpath, uid_of=_uid_of)


def item_violations(spec: Mapping[str, Any], policy: NodePolicy, *, node: str) -> list[str]:
    """The policy errors of one desired item on this host (empty: it may run)."""
    item = str(spec.get("name"))
    return [as_error(v, item=item, node=node, policy=policy) for v in violations(spec, policy, host=HOST)]
