"""The dev stack's broker: Debian's mosquitto, or amqtt only where mosquitto cannot be had.

The supervisor asks :func:`broker_command` for the argv of its first child. The broker
listens on 127.0.0.1 only, lets anyone in (nothing leaves this machine) and keeps its
retained topics in the state folder, so a second start finds the desired plane again.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from dev_stack.errors import DevError
from dev_stack.settings import DevSettings
from phrame.mqtt.broker_config import MAX_QUEUED_MESSAGES


def find_mosquitto() -> str | None:
    found = shutil.which("mosquitto")
    if found:
        return found
    return next((p for p in ("/usr/sbin/mosquitto", "/usr/bin/mosquitto") if os.access(p, os.X_OK)), None)


def mosquitto_config(settings: DevSettings) -> str:
    lines = [
        "# written by phrame dev at every start",
        "per_listener_settings false",
        f"listener {settings.broker_port} 127.0.0.1",
        "allow_anonymous true",
        "persistence true",
        f"persistence_location {settings.broker_dir}/",
        "autosave_interval 30",
        "log_dest stdout",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "set_tcp_nodelay true",
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",  # as the generated production config
    ]
    if os.geteuid() == 0:
        lines.append("user root")  # else mosquitto drops to 'mosquitto' and cannot write the state
    return "\n".join(lines) + "\n"


def amqtt_config(settings: DevSettings) -> str:
    return (
        "listeners:\n"
        "  default:\n"
        "    type: tcp\n"
        f"    bind: 127.0.0.1:{settings.broker_port}\n"
        "auth:\n"
        "  allow-anonymous: true\n"
        "topic-check:\n"
        "  enabled: false\n"
    )


def broker_command(settings: DevSettings) -> tuple[str, list[str]]:
    """(which broker, argv) after writing its configuration into the state folder."""
    settings.broker_dir.mkdir(parents=True, exist_ok=True)
    mosquitto = find_mosquitto() if settings.broker in ("auto", "mosquitto") else None
    if mosquitto:
        conf = settings.broker_dir / "mosquitto.conf"
        conf.write_text(mosquitto_config(settings))
        return "mosquitto", [mosquitto, "-c", str(conf)]
    if settings.broker == "mosquitto":
        raise DevError("mosquitto is not installed (Debian package mosquitto; make deps installs it)")
    amqtt = Path(sys.executable).parent / "amqtt"
    if not amqtt.exists():
        raise DevError("neither mosquitto (Debian package) nor amqtt (pip install amqtt) is installed")
    conf = settings.broker_dir / "amqtt.yaml"
    conf.write_text(amqtt_config(settings))
    return "amqtt", [str(amqtt), "-c", str(conf)]
