"""What one dev stack is: its options, its state-folder layout and the ports it needs.

``phrame dev`` builds one :class:`DevSettings` from its command line; every other module of
the package reads paths and ports from it, so the layout lives in one place. Pure apart
from the port probe; it never starts anything.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dev_stack.errors import DevError
from dev_stack.files import write_private
from phrame.settings import Listen, parse_host_port

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
DEFAULT_STATE_DIR = ".phrame-dev"
DEFAULT_BROKER_PORT = 1883  # the settings' defaults, so every phrame command finds the stack
DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_WEB_PORT = 8081
DEFAULT_API_PORT = 8090  # the topic API and dashboard (PHRAME_LISTEN of phrame topic-api)
DEFAULT_STANDBY_PORT = 8082  # --ha: the second config-sync (on the --listen host)
HA_LEASE_S = "4"  # --ha: PHRAME_HA_LEASE_S of both config-syncs, unless the caller set it
IMAGE = "phrame-quickstart/busybox:1"


@dataclass(frozen=True)
class DevSettings:
    state_dir: Path
    nodes: tuple[str, ...] = ("dev-1", "dev-2")
    environment: str = "quickstart"
    broker_port: int = DEFAULT_BROKER_PORT
    listen: str = DEFAULT_LISTEN
    web_port: int = DEFAULT_WEB_PORT
    api_port: int = DEFAULT_API_PORT
    broker: str = "auto"  # auto or mosquitto: the one broker that checks passwords and the ACL
    image: str = IMAGE
    ha: bool = False  # two config-syncs, active + standby (--ha)
    standby_port: int = DEFAULT_STANDBY_PORT
    extra: dict[str, str] = field(default_factory=dict)  # nothing yet

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir).absolute())
        for name in (*self.nodes, self.environment):
            if not NAME.match(name):
                raise DevError(f"{name!r} is not a valid name (lower-case letters, digits, '-')")
        if not self.nodes:
            raise DevError("--nodes must be at least 1")
        self.listen_address  # noqa: B018 -- a bad --listen fails before anything starts

    @staticmethod
    def node_names(count: int, prefix: str = "dev") -> tuple[str, ...]:
        return tuple(f"{prefix}-{i}" for i in range(1, count + 1))

    # -- addresses
    @property
    def listen_address(self) -> Listen:
        return parse_host_port(self.listen, name="--listen", example=DEFAULT_LISTEN, error=DevError)

    @property
    def broker_url(self) -> str:
        return f"mqtt://127.0.0.1:{self.broker_port}"

    @property
    def config_sync_url(self) -> str:
        host, port = self.listen_address
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"

    @property
    def standby_listen(self) -> str:
        """--ha: the second config-sync's host:port (the first's host)."""
        host, _ = self.listen_address
        return f"[{host}]:{self.standby_port}" if ":" in host else f"{host}:{self.standby_port}"

    @property
    def standby_url(self) -> str:
        host, _ = self.listen_address
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.standby_port}"

    @property
    def config_sync_urls(self) -> list[str]:
        """Every config-sync's base URL: the git hook posts each push to all of them."""
        return [self.config_sync_url, self.standby_url] if self.ha else [self.config_sync_url]

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/"

    @property
    def api_url(self) -> str:
        """The dashboard (the topic API's ``/``); the API is under ``api/``."""
        return f"http://127.0.0.1:{self.api_port}/"

    # -- the state folder
    @property
    def repo(self) -> Path:
        return self.state_dir / "config.git"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        """Pid files; a ``<child>.hold`` file here keeps that child from being restarted."""
        return self.state_dir / "run"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "dev.pid"

    @property
    def secret_file(self) -> Path:
        return self.state_dir / "webhook-secret"

    @property
    def api_token_file(self) -> Path:
        """The topic API's bearer token for writes (0600, made once)."""
        return self.state_dir / "api-token"

    @property
    def mirror_dir(self) -> Path:
        return self.state_dir / "mirror"

    @property
    def broker_dir(self) -> Path:
        return self.state_dir / "broker"

    @property
    def credentials_dir(self) -> Path:
        """One file per broker account holding its password, remade at every start (0600)."""
        return self.state_dir / "credentials"

    @property
    def stack_file(self) -> Path:
        """What ``--down`` needs to know after the fact (node names, ports)."""
        return self.state_dir / "stack.json"

    def agent_state(self, node: str) -> Path:
        return self.state_dir / "agents" / node

    def workdir(self, node: str) -> Path:
        """The quickstart's host process works here (the sample names it)."""
        return self.state_dir / "work" / node

    def save(self) -> None:
        doc = asdict(self) | {"state_dir": str(self.state_dir)}
        write_private(self.stack_file, json.dumps(doc, indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> DevSettings | None:
        """The settings a previous start saved in ``state_dir``, or None."""
        path = Path(state_dir) / "stack.json"
        try:
            doc = json.loads(path.read_text())
            doc["nodes"] = tuple(doc["nodes"])
            return cls(**doc)
        except (OSError, ValueError, TypeError, KeyError):
            return None


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def taken_ports(settings: DevSettings, *, skip: tuple[int, ...] = ()) -> list[str]:
    """The stack's ports something already listens on, each named with its option."""
    host, port = settings.listen_address
    wanted = [
        (settings.broker_port, "127.0.0.1", "--broker-port (the broker)"),
        (port, host, "--listen (config-sync)"),
        (settings.web_port, "127.0.0.1", "--web-port (the quickstart page)"),
        *([(settings.standby_port, host, "--standby-port (the standby config-sync)")] if settings.ha else []),
        (settings.api_port, "127.0.0.1", "--api-port (the topic API and dashboard)"),
    ]
    return [
        f"port {p} on {h} is already in use: {what}"
        for p, h, what in wanted
        if p not in skip and port_in_use(p, h)
    ]
