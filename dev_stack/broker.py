"""The dev stack's broker: Debian's mosquitto with production's passwords and ACL.

The supervisor asks :func:`broker_command` for the argv of its first child. The broker
listens on 127.0.0.1 only, lets no one in without a password (every local user can reach
127.0.0.1, and the agents run what the desired plane says), and keeps its retained topics in
the state folder, so a second start finds the desired plane again. amqtt is not offered: it
cannot check mosquitto's password file and ACL.
"""

from __future__ import annotations

import os
import shutil

from dev_stack.errors import DevError
from dev_stack.files import write_private
from dev_stack.settings import DevSettings
from phrame.mqtt.broker_config import CLIENT_ID_IS_USER, MAX_INFLIGHT_MESSAGES, MAX_QUEUED_MESSAGES


def find_mosquitto() -> str | None:
    found = shutil.which("mosquitto")
    if found:
        return found
    return next((p for p in ("/usr/sbin/mosquitto", "/usr/bin/mosquitto") if os.access(p, os.X_OK)), None)


def mosquitto_config(settings: DevSettings) -> str:
    lines = [
        "# written by phrame dev at every start",
        "per_listener_settings false",
        # as the generated production config: passwords, the ACL, ids bound to accounts
        "allow_anonymous false",
        f"password_file {settings.broker_dir}/passwd",
        f"acl_file {settings.broker_dir}/acl",
        f"listener {settings.broker_port} 127.0.0.1",
        CLIENT_ID_IS_USER,
        "persistence true",
        f"persistence_location {settings.broker_dir}/",
        "autosave_interval 30",
        "log_dest stdout",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "set_tcp_nodelay true",
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",  # as the generated production config
        f"max_inflight_messages {MAX_INFLIGHT_MESSAGES}",
    ]
    if os.geteuid() == 0:
        lines.append("user root")  # else mosquitto drops to 'mosquitto' and cannot write the state
    return "\n".join(lines) + "\n"


def broker_command(settings: DevSettings) -> tuple[str, list[str]]:
    """(which broker, argv) after writing its configuration (the same at every call; the
    passwords it names are :func:`dev_stack.credentials.write_credentials`'s, made once per start)."""
    mosquitto = find_mosquitto()
    if not mosquitto:
        raise DevError(
            "mosquitto is not installed (Debian package mosquitto; make deps installs it): the dev "
            "stack's broker checks passwords and the ACL as production's does"
        )
    settings.broker_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    conf = settings.broker_dir / "mosquitto.conf"
    write_private(conf, mosquitto_config(settings))
    return "mosquitto", [mosquitto, "-c", str(conf)]
