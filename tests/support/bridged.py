"""A hub broker and a site broker bridged to it, both run from ``phrame broker-config`` output.

For tests/integration/test_bridged_brokers.py: TLS listeners with a test PKI, password
files for the accounts the test uses, the site's persistence in a folder the broker's own
user may write. Started and stopped by pid (tests.support.mosquitto).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from phrame.cli import main as phrame_main
from phrame.mqtt import MqttClient, MqttSettings
from tests.support.certs import Pki, make_pki
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port, require_binary, wait_for_port

SITE = "site-a"
BRIDGE = f"bridge-{SITE}"


def password(user: str) -> str:
    return f"pw-{user}"


@dataclass
class Broker:
    name: str
    folder: Path
    mqtt_port: int
    ws_port: int
    pki: Pki
    mosquitto: Mosquitto | None = None

    @property
    def url(self) -> str:
        return f"mqtts://127.0.0.1:{self.mqtt_port}"

    def settings(self, user: str, **kw: object) -> MqttSettings:
        base = MqttSettings(url=self.url, username=user, password=password(user),
                            tls_ca=str(self.pki.ca), reconnect_max_s=1)  # fmt: skip
        return replace(base, **kw)  # type: ignore[arg-type]

    def client(self, user: str, started: list[MqttClient]) -> MqttClient:
        c = MqttClient(self.settings(user), user)
        c.start(timeout=10)
        started.append(c)
        return c

    def start(self) -> Broker:
        self.mosquitto = Mosquitto.generated(self.folder, self.mqtt_port).start()
        assert wait_for_port(self.ws_port), self.mosquitto.log()
        return self

    def stop(self) -> None:
        if self.mosquitto is not None:
            self.mosquitto.stop()

    def log(self) -> str:
        return self.mosquitto.log() if self.mosquitto else ""

    def env(self, user: str) -> dict[str, str]:
        """The ``PHRAME_*`` settings of a service logging in as ``user`` here."""
        return {
            "PHRAME_DESIRED_MQTT_URL": self.url,
            "PHRAME_MQTT_USERNAME": user,
            "PHRAME_MQTT_PASSWORD": password(user),
            "PHRAME_TLS_CA": str(self.pki.ca),
            "PHRAME_MQTT_RECONNECT_MAX_S": "1",
        }


def _passwd(folder: Path, users: list[str]) -> None:
    binary = require_binary("mosquitto_passwd", "mosquitto")
    passwd = folder / "passwd"
    for i, user in enumerate(users):
        create = ["-c"] if i == 0 else []
        subprocess.run([binary, *create, "-b", str(passwd), user, password(user)], check=True)
    passwd.chmod(0o644)  # mosquitto reads it after dropping to its own user


def generate(inventory: Path, *, site_nodes: list[str]) -> tuple[Broker, Broker]:
    """Generate (not start) the hub and the site broker for ``inventory``."""
    root = Path(tempfile.mkdtemp(prefix="phrame-bridged-"))
    root.chmod(0o755)  # mosquitto, once it dropped to its own user, enters it
    pki = make_pki(("localhost", "127.0.0.1"), directory=root / "pki")
    hub = Broker("hub", root / "hub", free_port(), free_port(), pki)
    site = Broker("site", root / "site", free_port(), free_port(), pki)
    hub_pw = root / "bridge-password"
    hub_pw.write_text(password(BRIDGE) + "\n")
    stores = {}
    for name in ("hub", "site"):
        stores[name] = root / f"{name}-data"
        stores[name].mkdir()
        if os.geteuid() == 0:
            shutil.chown(stores[name], "mosquitto")  # the broker writes its store as its own user
    for broker, extra in (
        (hub, ["--site", SITE, "--persistence-dir", f"{stores['hub']}/"]),
        (site, ["--role", "site", "--site", SITE, "--hub-url", hub.url, "--hub-password-file",
                str(hub_pw), "--persistence-dir", f"{stores['site']}/"]),
    ):  # fmt: skip
        code = phrame_main([
            "broker-config", "--inventory", str(inventory), "--out", str(broker.folder),
            "--bind", "127.0.0.1", "--mqtt-port", str(broker.mqtt_port),
            "--ws-port", str(broker.ws_port), "--tls-dir", str(pki.dir),
            "--conf-dir", str(broker.folder), *extra,
        ])  # fmt: skip
        assert code == 0, f"broker-config for the {broker.name} failed"
    _passwd(hub.folder, ["config-sync", "placement", "observer", BRIDGE])
    _passwd(site.folder, ["observer", *(f"node-{n}" for n in site_nodes)])
    return hub, site


def service(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``phrame ARGS`` as a subprocess with only ``env`` as its ``PHRAME_*`` settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")} | env
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "phrame", *args], env=clean,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
