"""The settings of config-sync, read once from ``PHRAME_*`` variables (docs/operations/settings.md).

``__main__`` and ``phrame config-sync`` call :meth:`SyncSettings.from_env`; tests build the
dataclass directly. Secrets given as ``*_FILE`` are read here and never appear in ``repr``;
reading goes through the shared ``phrame.settings.EnvReader``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from config_sync.errors import SettingsError
from phrame.mqtt import MqttSettings
from phrame.settings import EnvReader, Listen, parse_host_port
from phrame.settings.git_host import REPO_URL, git_host_fields, git_host_problem
from phrame.settings.http_serving import HttpLimits

DEFAULT_STATE_DIR = "/var/lib/phrame"  # as every service; config-sync keeps its clone in config-sync/

DEFAULT_LISTEN = "127.0.0.1:8080"
DEFAULT_NOTIFY_SECRETS_DIR = "/etc/phrame/notify"  # the files holding notify: targets' URLs
MAX_BODY_BYTES = 1024 * 1024  # GitLab push payloads are capped at 20 commits; 1 MiB is ample
INSECURE_FLAG = "PHRAME_INSECURE_NO_WEBHOOK_SECRET"
MIN_LEASE_S = 2.0  # renewed every third: shorter would not survive one slow PUBACK


@dataclass(frozen=True)
class SyncSettings:
    repo_url: str = field(repr=False)  # as set: may hold credentials, split off by git_repo
    state_dir: str
    git_host: str = "local"
    gitlab_url: str | None = None
    gitlab_token: str | None = field(default=None, repr=False)
    gitlab_project: str | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    insecure_no_webhook_secret: bool = False  # development only: no token checked at all
    tokens_file: str | None = None  # named, scoped, hashed tokens (promote, /sync, full /status)
    listen: str = DEFAULT_LISTEN
    poll_s: float = 60.0
    debounce_s: float = 0.5
    retry_min_s: float = 1.0  # a transiently failed sync runs again after this, doubling ...
    retry_max_s: float = 60.0  # ... up to this (per ref; reset by a success)
    deploy_timeout_s: float = 600.0
    deploy_settle_s: float = 5.0  # a replica counts as healthy once it ran this long without a restart
    anti_entropy_s: float = 300.0  # the whole desired plane read back and repaired this often
    node_timeout_s: float = 20.0  # a node whose heartbeat is older is offline (as placement)
    git_timeout_s: float = 120.0  # a git fetch running longer is killed (a transient error)
    git_ca_file: str | None = None  # a private CA for an HTTPS repo_url; None: the system's
    topic_prefix: str = "phrame"
    notify_secrets_dir: str = DEFAULT_NOTIFY_SECRETS_DIR  # where notify: url_file names are read
    notify_timeout_s: float = 5.0  # one notification POST
    notify_attempts: int = 6  # tries of one notification before it is given up
    notify_retry_min_s: float = 1.0  # between tries: this, doubling ...
    notify_retry_max_s: float = 60.0  # ... up to this
    default_ref: str = "main"
    preview_ports: tuple[int, int] = (20000, 29999)  # host ports merge-request previews publish on
    max_body_bytes: int = MAX_BODY_BYTES
    http: HttpLimits = field(default_factory=HttpLimits)
    mqtt: MqttSettings = field(default_factory=MqttSettings)
    actual_mqtt: MqttSettings | None = None  # None: the desired plane's broker
    ha_lease_s: float = 0.0  # > 0: active + standby behind a lease on the broker (config_sync.lease)
    instance_id: str = ""  # this instance's name in the lease; "": host name and process id

    def __post_init__(self) -> None:
        # a full ref name (refs/heads/main) names the same branch; git_repo reads branch names
        branch = self.default_ref.removeprefix("refs/heads/")
        object.__setattr__(self, "default_ref", branch or "main")
        if self.webhook_secret is not None and not self.webhook_secret.strip():
            # an empty secret would make an empty X-Gitlab-Token valid
            raise SettingsError(
                f"PHRAME_WEBHOOK_SECRET (or its _FILE) is empty; set a secret ({INSECURE_FLAG}=true"
                " and no secret turns authentication off, for development only)"
            )
        problem = git_host_problem(
            self.git_host,
            {
                "PHRAME_GITLAB_URL": self.gitlab_url,
                "PHRAME_GITLAB_TOKEN": self.gitlab_token,
                "PHRAME_GITLAB_PROJECT": self.gitlab_project,
                "PHRAME_WEBHOOK_SECRET": self.webhook_secret,
            },
        )
        if problem:
            raise SettingsError(problem)
        self.listen_address  # noqa: B018 -- fail at start-up on a bad PHRAME_LISTEN
        if self.ha_lease_s and self.ha_lease_s < MIN_LEASE_S:
            raise SettingsError(
                f"PHRAME_HA_LEASE_S={self.ha_lease_s:g}: at least {MIN_LEASE_S:g} s"
                " (renewed every third of it; 0 runs a single config-sync without a lease)"
            )
        if len(self.instance_id) > 128 or any(c.isspace() for c in self.instance_id):
            raise SettingsError(f"PHRAME_INSTANCE_ID={self.instance_id!r}: at most 128 characters, no spaces")

    def require_webhook_auth(self) -> None:
        """Refuse to serve HTTP without a webhook secret, unless explicitly insecure."""
        if self.webhook_secret is None and not self.insecure_no_webhook_secret:
            raise SettingsError(
                "PHRAME_WEBHOOK_SECRET (or PHRAME_WEBHOOK_SECRET_FILE) is required: it authenticates"
                f" webhooks, /sync and the full /status ({INSECURE_FLAG}=true turns authentication"
                " off, for development only)"
            )

    @property
    def listen_address(self) -> Listen:
        return parse_host_port(self.listen, name="PHRAME_LISTEN", example=DEFAULT_LISTEN, error=SettingsError)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SyncSettings:
        e = EnvReader(env, error=SettingsError)
        repo_url = e.required("PHRAME_REPO_URL", REPO_URL)
        return cls(
            repo_url=repo_url,
            state_dir=e.text("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or DEFAULT_STATE_DIR,
            **git_host_fields(e),
            webhook_secret=e.secret("PHRAME_WEBHOOK_SECRET"),
            insecure_no_webhook_secret=e.flag(INSECURE_FLAG, False),
            tokens_file=e.text("PHRAME_TOKENS_FILE"),
            listen=e.text("PHRAME_LISTEN", DEFAULT_LISTEN) or DEFAULT_LISTEN,
            poll_s=e.number("PHRAME_POLL_S", 60.0, minimum=1.0),
            debounce_s=e.number("PHRAME_DEBOUNCE_S", 0.5, minimum=0.0),
            retry_min_s=e.number("PHRAME_RETRY_MIN_S", 1.0, minimum=0.1),
            retry_max_s=e.number("PHRAME_RETRY_MAX_S", 60.0, minimum=1.0),
            deploy_timeout_s=e.number("PHRAME_DEPLOY_TIMEOUT_S", 600.0, minimum=1.0),
            deploy_settle_s=e.number("PHRAME_DEPLOY_SETTLE_S", 5.0, minimum=0.0),
            anti_entropy_s=e.number("PHRAME_ANTI_ENTROPY_S", 300.0, minimum=1.0),
            node_timeout_s=e.number("PHRAME_NODE_TIMEOUT_S", 20.0, minimum=0.1),
            git_timeout_s=e.number("PHRAME_GIT_TIMEOUT_S", 120.0, minimum=1.0),
            git_ca_file=e.text("PHRAME_GIT_CA_FILE"),
            topic_prefix=e.topic_prefix(),
            notify_secrets_dir=e.text("PHRAME_NOTIFY_SECRETS_DIR", DEFAULT_NOTIFY_SECRETS_DIR)
            or DEFAULT_NOTIFY_SECRETS_DIR,
            notify_timeout_s=e.number("PHRAME_NOTIFY_TIMEOUT_S", 5.0, minimum=0.1),
            notify_attempts=e.integer("PHRAME_NOTIFY_ATTEMPTS", 6, minimum=1),
            notify_retry_min_s=e.number("PHRAME_NOTIFY_RETRY_MIN_S", 1.0, minimum=0.01),
            notify_retry_max_s=e.number("PHRAME_NOTIFY_RETRY_MAX_S", 60.0, minimum=0.01),
            default_ref=e.text("PHRAME_TRACK_REF", "main") or "main",
            preview_ports=port_range(e.text("PHRAME_PREVIEW_PORTS", "20000-29999") or "20000-29999"),
            max_body_bytes=e.integer("PHRAME_MAX_BODY_BYTES", MAX_BODY_BYTES, minimum=1024),
            http=HttpLimits.from_env(e),
            mqtt=MqttSettings.from_env("desired", env),
            actual_mqtt=MqttSettings.from_env("actual", env),
            ha_lease_s=e.number("PHRAME_HA_LEASE_S", 0.0, minimum=0.0),
            instance_id=e.text("PHRAME_INSTANCE_ID", "") or "",
        )


def port_range(text: str) -> tuple[int, int]:
    """``PHRAME_PREVIEW_PORTS``: ``FIRST-LAST``, host ports 1-65535, FIRST <= LAST."""
    first, sep, last = text.strip().partition("-")
    try:
        lo, hi = int(first), int(last)
    except ValueError:
        lo = hi = 0
    if not sep or not 1 <= lo <= hi <= 65535:
        raise SettingsError(
            f"PHRAME_PREVIEW_PORTS={text!r}: expected FIRST-LAST, ports 1-65535 (e.g. 20000-29999)"
        )
    return lo, hi
