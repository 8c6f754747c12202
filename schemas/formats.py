"""The ``format`` keywords of the config schemas that a regular expression cannot express.

``registry.validator`` checks them (jsonschema's FormatChecker with these formats only).
Each check returns True for what works and raises ValueError saying why, in words a
person can act on; ``phrame.config_repo.validate`` puts that reason in the problem's message.
Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from jsonschema import FormatChecker

MAX_DURATION_S = 24 * 3600
MIN_DURATION_NS = 1_000_000  # Docker takes 0 (its default) or at least 1 ms
_UNIT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)")
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
# the smallest networks that still hold a gateway and one container
_MAX_PREFIX = {4: 30, 6: 126}

CHECKER = FormatChecker(formats=())
Check = Callable[[object], bool]


def _checks(name: str, raises: type[Exception]) -> Callable[[Check], Check]:
    """``CHECKER.checks`` with its type said (jsonschema leaves the decorator untyped)."""
    register: Callable[[Check], Check] = CHECKER.checks(name, raises=raises)
    return register


@_checks("ip-network", raises=ValueError)
def ip_network(value: object) -> bool:
    if not isinstance(value, str):
        return True
    _, slash, prefix = value.partition("/")
    if not slash or not prefix.isdigit():
        raise ValueError("a subnet needs a prefix length after '/', such as 10.77.0.0/24")
    try:
        net = ipaddress.ip_network(value, strict=False)
        is_network = ipaddress.ip_address(value.partition("/")[0]) == net.network_address
    except ValueError:
        raise ValueError("not an IPv4 or IPv6 network in CIDR form (10.77.0.0/24, fd00:77::/64)") from None
    if not is_network:
        raise ValueError(f"host bits are set: the network is {net}")
    if net.prefixlen > _MAX_PREFIX[net.version]:
        raise ValueError(f"/{net.prefixlen} leaves no address for a gateway and a container")
    return True


@_checks("go-duration", raises=ValueError)
def duration(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return True  # the pattern says what is wrong
    try:
        ns = sum(Decimal(n) * _UNIT_NS[u] for n, u in parts)
    except InvalidOperation:
        ns = Decimal("Infinity")
    if ns > MAX_DURATION_S * 10**9:
        raise ValueError("a duration is at most 24h")
    if 0 < ns < MIN_DURATION_NS:
        raise ValueError("a duration is 0 or at least 1ms (Docker's smallest)")
    return True


_SIGNAL_SHAPE = re.compile(r"SIG[A-Z0-9+-]{1,16}")
# the names Docker's daemon knows on Linux (moby/sys/signal), without the SIG prefix
_NAMES = (
    "ABRT ALRM BUS CHLD CLD CONT FPE HUP ILL INT IO IOT KILL PIPE POLL PROF PWR QUIT SEGV STKFLT "
    "STOP SYS TERM TRAP TSTP TTIN TTOU URG USR1 USR2 VTALRM WINCH XCPU XFSZ RTMIN RTMAX"
)
_SIGNALS = (
    frozenset(_NAMES.split()) | {f"RTMIN+{i}" for i in range(1, 16)} | {f"RTMAX-{i}" for i in range(1, 15)}
)


@_checks("signal", raises=ValueError)
def signal_name(value: object) -> bool:
    if not isinstance(value, str) or not _SIGNAL_SHAPE.fullmatch(value):
        return True  # a number, or a shape the pattern speaks about
    if value[3:] not in _SIGNALS:
        raise ValueError(
            "no such signal on Linux (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGRTMIN+3, ...)"
        )
    return True


@_checks("ip-address", raises=ValueError)
def ip_address(value: object) -> bool:
    if not isinstance(value, str) or value == "host-gateway":
        return True
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError("not an IPv4 or IPv6 address (10.0.0.5, fd00::5) or host-gateway") from None
    return True


def _limit(value: int) -> float:
    return float("inf") if value == -1 else value


@_checks("ulimit", raises=ValueError)
def ulimit(value: object) -> bool:
    if not isinstance(value, dict):
        return True
    soft, hard = value.get("soft"), value.get("hard")
    if (
        not isinstance(soft, int)
        or not isinstance(hard, int)
        or isinstance(soft, bool)
        or isinstance(hard, bool)
    ):
        return True  # the properties' types say what is wrong
    if _limit(soft) > _limit(hard):
        raise ValueError(f"soft {soft} is above hard {hard} (-1 is unlimited)")
    return True


def _ref_problem(value: str) -> str | None:
    """Why ``value`` is not a branch or tag name git would accept as it is, or None.

    The rules of ``git check-ref-format``, plus: never a leading '-' (git would read an
    option), and only ``refs/heads/`` or ``refs/tags/`` among full ref names."""
    bad = _REF_FORBIDDEN.search(value)
    if bad is not None:
        char = bad.group()
        shown = repr(char) if char.isprintable() else f"U+{ord(char):04X}"
        return f"contains {shown} (no spaces, control characters or any of ~ ^ : ? * [ \\)"
    for sequence in ("..", "@{", "//"):
        if sequence in value:
            return f"contains {sequence!r}"
    if value.startswith("refs/"):
        kind, _, short = value[len("refs/") :].partition("/")
        if kind not in ("heads", "tags") or short.startswith("refs/"):
            return "a full ref name must start with refs/heads/ or refs/tags/"
        if not short:
            return f"{value!r} names no branch or tag"
        if short.startswith("-"):
            return f"the {'branch' if kind == 'heads' else 'tag'} name starts with '-'"
    if value in ("@", "HEAD"):
        return f"{value!r} names no branch"
    if value[0] in "/-.":
        return f"starts with {value[0]!r}"
    if value.endswith("/") or value.endswith("."):
        return f"ends with {value[-1]!r}"
    for component in value.split("/"):
        if component.startswith("."):
            return f"a part of it starts with '.' ({component!r})"
        if component.endswith(".lock"):
            return f"a part of it ends with '.lock' ({component!r})"
    return None


SECRETS_DIR = "/etc/phrame/secrets"  # the node agent's default PHRAME_SECRETS_DIR


def _secret_problem(value: str) -> str | None:
    """Why ``value`` is no name of a file inside a node's secrets folder, or None."""
    if not value:
        return "an empty name"
    if value.startswith("/"):
        inside = value.removeprefix(SECRETS_DIR + "/")
        if inside != value and _secret_problem(inside) is None:
            return f"an absolute path: write {inside!r}, relative to the node's PHRAME_SECRETS_DIR"
        return (
            "an absolute path; a secret is a name relative to the node's PHRAME_SECRETS_DIR "
            f"(default {SECRETS_DIR}), which the agent reads files from only"
        )
    parts = value.split("/")
    if ".." in parts:
        return "'..' would leave PHRAME_SECRETS_DIR"
    if "" in parts:
        return "an empty part ('//' or a trailing '/')"
    if "." in parts:
        return "a '.' part; name the file as it is, relative to PHRAME_SECRETS_DIR"
    return None


@_checks("secret-name", raises=ValueError)
def secret_name(value: object) -> bool:
    if not isinstance(value, str):
        return True
    problem = _secret_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return True


@_checks("git-ref", raises=ValueError)
def git_ref(value: object) -> bool:
    if not isinstance(value, str) or not value:
        return True  # minLength says so
    problem = _ref_problem(value)
    if problem is not None:
        raise ValueError(f"not a git branch or tag name: {problem}")
    return True
