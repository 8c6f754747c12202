"""Is the dev stack ready: the broker answers, config-sync is ready, the topic API has both
snapshots, every agent is online (watched with the supervisor's own read-only account).

The supervisor polls :class:`Readiness` until :meth:`Readiness.missing` is empty, then
prints its banner once. Node statuses come from one MQTT subscription; it only reads.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request

from dev_stack.credentials import SUPERVISOR_ACCOUNT, password_file
from dev_stack.settings import DevSettings
from phrame.mqtt import Message, MqttClient, MqttError, MqttSettings, SettingsError
from schemas import Topics


def broker_answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def config_sync_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def topic_api_ready(base_url: str) -> bool:
    """The topic API answers and has read both planes' snapshots."""
    try:
        with urllib.request.urlopen(f"{base_url}healthz", timeout=1) as response:
            loaded = json.loads(response.read()).get("snapshots", {})
    except (OSError, ValueError, urllib.error.HTTPError):
        return False
    return bool(loaded.get("desired") and loaded.get("actual"))


class Readiness:
    def __init__(self, settings: DevSettings) -> None:
        self.settings = settings
        self.topics = Topics("phrame")
        self.states: dict[str, str] = {}
        self._lock = threading.Lock()
        self.client: MqttClient | None = None

    def _on_status(self, msg: Message) -> None:
        node = msg.topic.split("/")[-2]
        try:
            state = str(json.loads(msg.payload or b"{}").get("state", "?"))
        except ValueError:
            state = "?"
        with self._lock:
            self.states[node] = state

    def _watch(self) -> bool:
        if self.client is not None:
            return True
        login = {
            "PHRAME_DESIRED_MQTT_URL": self.settings.broker_url,
            "PHRAME_MQTT_USERNAME": SUPERVISOR_ACCOUNT,
            "PHRAME_MQTT_PASSWORD_FILE": str(password_file(self.settings, SUPERVISOR_ACCOUNT)),
        }
        try:
            mqtt = MqttSettings.from_env("desired", login)
        except SettingsError:  # the password file is written before the broker starts
            return False
        client = MqttClient(mqtt, f"phrame-dev-readiness-{os.getpid()}")
        try:
            client.start(timeout=2)
            client.subscribe(f"{self.topics.prefix}/actual/nodes/+/status", self._on_status)
        except MqttError:
            client.stop()
            return False
        self.client = client
        return True

    def missing(self) -> list[str]:
        """What is not ready yet, each as a few words (empty: ready)."""
        if not broker_answers(self.settings.broker_port):
            return [f"the broker on 127.0.0.1:{self.settings.broker_port}"]
        out = []
        if not config_sync_ready(self.settings.config_sync_url):
            out.append(f"config-sync ({self.settings.config_sync_url}/readyz)")
        if not topic_api_ready(self.settings.api_url):
            out.append(f"the topic API and mirrors ({self.settings.api_url}healthz)")
        if not self._watch():
            return [*out, "a connection to the broker"]
        with self._lock:
            offline = [n for n in self.settings.nodes if self.states.get(n) != "online"]
        if offline:
            out.append("agents " + ", ".join(offline) + " to report online")
        return out

    def close(self) -> None:
        if self.client is not None:
            self.client.stop()
            self.client = None
