"""The children of the dev stack, in start order, each with its command line and settings.

The supervisor calls :func:`build_children` once. Every child gets the dev stack's broker,
repository and ports whatever the caller's environment says (settings that would point a
child elsewhere are dropped), while tuning settings (timeouts, intervals) pass through, so
``PHRAME_NODE_TIMEOUT_S=5 phrame dev`` shortens placement's grace period.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from dev_stack import age_keys
from dev_stack.broker import broker_command
from dev_stack.children import Child
from dev_stack.credentials import password_file
from dev_stack.node_policy import policy_path
from dev_stack.settings import HA_LEASE_S, DevSettings
from phrame.mqtt.broker_config import STANDBY_ACCOUNT, node_account

# settings that choose *where* things are: the dev stack decides them for its children
SCRUBBED_PREFIXES = (
    "PHRAME_DESIRED_MQTT_URL",
    "PHRAME_ACTUAL_MQTT_URL",
    "PHRAME_MQTT_USERNAME",
    "PHRAME_MQTT_PASSWORD",
    "PHRAME_OAUTH2_",
    "PHRAME_TLS_",
    "PHRAME_GITLAB_",
    "PHRAME_GIT_HOST",
    "PHRAME_REPO_URL",
    "PHRAME_WEBHOOK_SECRET",
    "PHRAME_STATE_DIR",
    "PHRAME_NODE_NAME",
    "PHRAME_LISTEN",
    "PHRAME_TOPIC_PREFIX",
    "PHRAME_TRACK_REF",
    "PHRAME_LOCK_FILE",
    "PHRAME_MIRROR_DIR",
    "PHRAME_API_TOKEN",
    "PHRAME_API_WRITE_PREFIXES",
    # one port for every child would collide: metrics in the dev stack stay off (docs/operations/metrics.md)
    "PHRAME_METRICS_LISTEN",
    "PHRAME_INSTANCE_ID",
)
# defaults for a stack on one machine, unless the caller set them
DEV_DEFAULTS = {
    "PHRAME_PLACEMENT_INTERVAL_S": "2",  # a new label-placed service is placed within ~2 s
    # one push is one hook here (GitLab's bursts are what config-sync's 0.5 s merges)
    "PHRAME_DEBOUNCE_S": "0.1",
    "PHRAME_LOG_FORMAT": "text",  # the console follows config-sync's text log
}


def base_env(settings: DevSettings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    env = DEV_DEFAULTS | env
    env["PHRAME_LOG_FORMAT"] = "text"
    env["PHRAME_DESIRED_MQTT_URL"] = settings.broker_url
    env["PYTHONUNBUFFERED"] = "1"
    return env


def login_env(settings: DevSettings, account: str) -> dict[str, str]:
    """The settings that log a client in to the dev stack's broker as ``account``."""
    return {
        "PHRAME_MQTT_USERNAME": account,
        "PHRAME_MQTT_PASSWORD_FILE": str(password_file(settings, account)),
    }


def _phrame(*args: str) -> list[str]:
    return [sys.executable, "-m", "phrame", *args]


def build_children(
    settings: DevSettings, environ: Mapping[str, str] | None = None
) -> tuple[str, list[Child]]:
    """(which broker, the children in start order: broker, config-sync, placement, the mirrors,
    the topic API, agents)."""
    env = base_env(settings, environ)
    # the sample's bare repository; the topic API pushes compose imports to branches of it
    repo = {"PHRAME_GIT_HOST": "local", "PHRAME_REPO_URL": str(settings.repo), "PHRAME_TRACK_REF": "main"}
    state = {"PHRAME_STATE_DIR": str(settings.state_dir)}
    which, broker_argv = broker_command(settings)

    def child(name: str, argv: list[str], extra: dict[str, str], account: str | None = None) -> Child:
        # each part logs in with its own account, as in production (the password in a file)
        login = {} if account is None else login_env(settings, account)
        return Child(name, argv, env | login | extra, settings.logs, settings.run_dir)

    children = [
        child("broker", broker_argv, {}),
        child(
            "config-sync",
            _phrame("config-sync"),
            repo
            | state
            | {"PHRAME_LISTEN": settings.listen, "PHRAME_WEBHOOK_SECRET_FILE": str(settings.secret_file)},
            "config-sync",
        ),
        child("placement", _phrame("placement"), repo | state, "placement"),
    ]
    if settings.ha:  # active + standby: a lease on the broker, a second instance on its own port
        lease = {"PHRAME_HA_LEASE_S": env.get("PHRAME_HA_LEASE_S", HA_LEASE_S)}
        children[1].env |= lease | {"PHRAME_INSTANCE_ID": "config-sync-a"}
        standby = {
            "PHRAME_LISTEN": settings.standby_listen,
            "PHRAME_WEBHOOK_SECRET_FILE": str(settings.secret_file),
            "PHRAME_STATE_DIR": str(settings.state_dir / "standby"),  # a clone of its own
            "PHRAME_INSTANCE_ID": "config-sync-b",
        }
        sync_b = child("config-sync-standby", _phrame("config-sync"), repo | lease | standby, STANDBY_ACCOUNT)
        children.insert(2, sync_b)
    # the mirrors and the topic API start before the agents: the dashboard sees them arrive
    mirror = state | {"PHRAME_MIRROR_DIR": str(settings.mirror_dir)}
    children += [
        child("mirror-desired", _phrame("mirror", "--plane", "desired"), mirror, "mirror-desired"),
        child("mirror-actual", _phrame("mirror", "--plane", "actual"), mirror, "mirror-actual"),
        child(
            "topic-api",
            _phrame("topic-api"),
            mirror
            | repo
            | {
                "PHRAME_LISTEN": f"127.0.0.1:{settings.api_port}",
                "PHRAME_API_TOKEN_FILE": str(settings.api_token_file),
                # the dashboard's Promote and Roll back go to this stack's config-sync
                "PHRAME_CONFIG_SYNC_URL": settings.config_sync_url,
            },
            "topic-api",
        ),
    ]
    for node in settings.nodes:
        agent = {
            "PHRAME_NODE_NAME": node,
            "PHRAME_STATE_DIR": str(settings.agent_state(node)),
            "PHRAME_SHARED_DAEMON": "true",  # several agents on one daemon: names carry the node
            "PHRAME_AGE_KEY_FILE": str(age_keys.key_file(settings, node)),  # decrypts secrets/*.sops.yaml
        }
        if "PHRAME_POLICY_FILE" not in env:  # the caller's own policy file wins
            agent["PHRAME_POLICY_FILE"] = str(policy_path(settings))
        children.append(child(f"agent-{node}", _phrame("node-agent"), agent, node_account(node)))
    return which, children
