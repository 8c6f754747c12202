"""The node policy: what a desired item may ask of the host it runs on, and the check of one.

The policy lives on the node (its agent reads ``PHRAME_POLICY_FILE``), never in the config
repo, so a commit cannot lift it. The agent checks every desired item with :func:`violations`
before it creates or starts it and reports the policy in its status; ``phrame validate
--policy-from-broker`` runs the same check on a rendering at review time. Pure: the caller
hands in how to resolve a host path and a user (the agent: ``realpath``, ``pwd``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: what a bind mount may never reach unless ``allow`` names the path or one inside it:
#: the whole host, its configuration and root's home, the kernel's views, the boot files
#: and the Docker socket (whoever holds it is root on the host)
PROTECTED = (
    "/",
    "/boot",
    "/dev",
    "/etc",
    "/proc",
    "/root",
    "/run/docker.sock",
    "/sys",
    "/var/run/docker.sock",
)
_ALL_INTERFACES = {None, "", "0.0.0.0", "::", "[::]"}
_ROOT_USERS = {"root", "0"}


def normal(path: str) -> str:
    """``path`` with ``.``, ``..`` and repeated slashes resolved (``//etc`` is ``/etc``)."""
    out = posixpath.normpath("/" + path.lstrip("/"))
    return "/" + out.lstrip("/")


def is_under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it (both normal)."""
    return root == "/" or path == root or path.startswith(root + "/")


@dataclass(frozen=True)
class NodePolicy:
    """A node's policy; the defaults are the policy of a node without a policy file."""

    allow: tuple[str, ...] = ()  # bind-mount roots
    deny: tuple[str, ...] = ()  # never mounted, never lifted
    protected: tuple[str, ...] = PROTECTED  # denied unless ``allow`` names them or inside them
    processes: bool = False
    users: tuple[str, ...] | None = None  # None: any user but root
    all_interfaces: bool = False
    file: str | None = None  # where it was read from; None: the defaults
    agent_user: str | None = None  # whom a process without ``user`` runs as

    @property
    def source(self) -> str:
        return f"policy file {self.file}" if self.file else "the default policy (no policy file)"

    def to_doc(self) -> dict[str, Any]:
        """The ``policy`` object of the node status (``node-policy`` schema)."""
        return {
            "file": self.file,
            "bind_mounts": {
                "allow": list(self.allow),
                "deny": list(self.deny),
                "protected": list(self.protected),
            },
            "processes": {
                "allowed": self.processes,
                "users": None if self.users is None else list(self.users),
                "agent_user": self.agent_user,
            },
            "ports": {"all_interfaces": self.all_interfaces},
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], *, file: str | None = None) -> NodePolicy:
        """From a document valid against the ``node-policy`` schema (a file's, or a status's)."""
        mounts = doc.get("bind_mounts") or {}
        procs = doc.get("processes") or {}
        users = procs.get("users")
        return cls(
            allow=tuple(normal(p) for p in mounts.get("allow") or ()),
            deny=tuple(normal(p) for p in mounts.get("deny") or ()),
            protected=tuple(normal(p) for p in mounts.get("protected", PROTECTED)),
            processes=bool(procs.get("allowed", False)),
            users=None if users is None else tuple(users),
            all_interfaces=bool((doc.get("ports") or {}).get("all_interfaces", False)),
            file=doc.get("file", file),
            agent_user=procs.get("agent_user"),
        )


@dataclass(frozen=True)
class HostLookups:
    """How the host answers: a path's real path (symlinks followed), a user's uid (None:
    unknown). The defaults know nothing of any host: lexical checks only."""

    resolve: Callable[[str], str] = field(default=lambda p: p)
    uid_of: Callable[[str], int | None] = field(default=lambda u: None)


@dataclass(frozen=True)
class Violation:
    """One thing a spec asks that the policy refuses: ``text`` reads ``<what> (<field>):
    <why>``; ``path`` is where the service file declares it (``("volumes", 0)``)."""

    text: str
    path: tuple[str | int, ...]

    def __str__(self) -> str:
        return self.text


def violations(
    spec: Mapping[str, Any], policy: NodePolicy, *, host: HostLookups | None = None
) -> list[Violation]:
    """What of a desired container or process spec ``policy`` does not allow; empty when it
    may run."""
    host = host or HostLookups()
    if spec.get("kind") == "process":
        return _process(spec, policy, host)
    out = []
    for i, volume in enumerate(spec.get("volumes") or ()):
        source = str(volume).split(":", 1)[0]
        if ":" in str(volume) and source.startswith("/"):
            why = _mount(source, policy, host)
            if why:
                out.append(
                    Violation(f"bind mount of {source} (volumes[{i}] {volume!r}): {why}", ("volumes", i))
                )
    for port in spec.get("ports") or ():
        if not policy.all_interfaces and port.get("host_ip") in _ALL_INTERFACES:
            host_port = port.get("host_port") or "a free port"
            published = f"{host_port}->{port.get('container_port')}/{port.get('protocol')}"
            text = f"port {published} on every interface (ports): name a host IP such as 127.0.0.1, "
            out.append(Violation(text + "or allow ports.all_interfaces", ("ports",)))
    return out


def _mount(source: str, policy: NodePolicy, host: HostLookups) -> str | None:
    """Why ``source`` may not be mounted, or None. Checked as written and, on a node, once
    more with links followed: Docker follows them, and a link can be left by a container."""
    path = normal(source)
    real = normal(host.resolve(path))
    for p in dict.fromkeys((path, real)):
        shown = p if p == path else f"{path} (a link to {p})"
        allow, deny, protected = policy.allow, policy.deny, policy.protected
        if p != path:  # the real path against the real paths of the policy's own
            allow, deny, protected = (_with_real(x, host) for x in (allow, deny, protected))
        if not any(is_under(p, a) for a in allow):
            return (
                f"{shown} is under no allowed root (bind_mounts.allow: {', '.join(policy.allow) or 'none'})"
            )
        for d in deny:
            if _overlaps(p, d):
                return f"{shown} reaches {d}, which bind_mounts.deny refuses"
        for d in protected:
            if _overlaps(p, d) and not _lifted(p, d, allow):
                what = "is protected" if p == d else f"reaches {d}, which is protected"
                return f"{shown} {what} unless bind_mounts.allow lists it"
    return None


def _lifted(path: str, protected: str, allow: tuple[str, ...]) -> bool:
    """A protected path is lifted by an allowed root that names it or a path inside it, and
    only below that root: a mount that holds the whole protected path needs it listed."""
    if is_under(path, protected):
        return any(is_under(path, a) for a in allow if is_under(a, protected))
    return protected in allow


def _with_real(paths: tuple[str, ...], host: HostLookups) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*paths, *(normal(host.resolve(p)) for p in paths))))


def _overlaps(path: str, denied: str) -> bool:
    """``path`` is ``denied``, inside it, or holds it (``/`` is only ever itself)."""
    if denied == "/":
        return path == "/"
    return is_under(path, denied) or is_under(denied, path)


def _process(spec: Mapping[str, Any], policy: NodePolicy, host: HostLookups) -> list[Violation]:
    if not policy.processes:
        return [Violation("host process (kind: process): processes.allowed is false", ("kind",))]
    user = spec.get("user") or None
    name = user or policy.agent_user
    field_, at = (
        ("user", ("user",)) if user else (f"no user: the agent's own, {name or 'unknown'}", ("kind",))
    )
    if name is None:
        return [Violation(f"process without a user ({field_}): name the user it runs as", at)]
    if policy.users is not None:
        if name not in policy.users:
            listed = ", ".join(policy.users)
            return [Violation(f"process as user {name} ({field_}): not in processes.users ({listed})", at)]
        return []
    if name.split(":", 1)[0] in _ROOT_USERS or host.uid_of(name) == 0:
        return [Violation(f"process as root ({field_}): list the user in processes.users to allow it", at)]
    return []


def as_error(violation: Violation, *, item: str, node: str, policy: NodePolicy) -> str:
    """One violation as the agent reports it on the item and its status."""
    return f"policy: {item}: {violation}; not allowed on {node} by {policy.source}"
