"""TLS of the shared client against a real mosquitto: host name check, client certificates.

A broker whose certificate names another host is refused unless the check is switched
off; a listener that requires client certificates admits only clients presenting one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttError, MqttSettings
from tests.support.certs import Pki, make_pki
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]


@dataclass
class TlsBroker:
    pki: Pki
    port: int

    def settings(self, **kw: object) -> MqttSettings:
        return MqttSettings(url=f"mqtts://127.0.0.1:{self.port}", tls_ca=str(self.pki.ca), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def wrong_name_broker() -> Iterator[TlsBroker]:
    """A broker with a certificate for ``broker.invalid`` only; client certs required."""
    d = Path(tempfile.mkdtemp(prefix="phrame-tls-"))
    d.chmod(0o755)  # mosquitto reads the files after dropping root
    pki = make_pki(("broker.invalid",), directory=d)
    port = free_port()
    lines = [
        "per_listener_settings false",
        "allow_anonymous true",
        f"listener {port} 127.0.0.1",
        f"cafile {pki.ca}",
        f"certfile {pki.server_cert}",
        f"keyfile {pki.server_key}",
        "require_certificate true",
    ]
    m = Mosquitto(lines, port=port, defaults=False).start()
    try:
        yield TlsBroker(pki, port)
    finally:
        m.stop()
        shutil.rmtree(d, ignore_errors=True)


def try_connect(s: MqttSettings) -> bool:
    client = MqttClient(s, "tls-probe")
    try:
        client.start(timeout=2)
    except MqttError:
        return False
    client.stop()
    return True


def test_host_name_is_checked_by_default(wrong_name_broker: TlsBroker) -> None:
    b = wrong_name_broker
    with_cert = {"tls_cert": str(b.pki.client_cert), "tls_key": str(b.pki.client_key)}
    assert not try_connect(b.settings(**with_cert))
    # The same client connects once the (documented) host name check is off, so the
    # refusal above was the name and nothing else.
    assert try_connect(b.settings(tls_verify_hostname=False, **with_cert))


def test_client_certificate_required_by_the_listener(wrong_name_broker: TlsBroker) -> None:
    assert not try_connect(wrong_name_broker.settings(tls_verify_hostname=False))


def test_unreadable_tls_files_fail_at_client_creation(tmp_path: Path) -> None:
    s = MqttSettings(url="mqtts://127.0.0.1:1", tls_ca=str(tmp_path / "missing.crt"))
    with pytest.raises(MqttError, match="PHRAME_TLS_CA"):
        MqttClient(s, "x")
