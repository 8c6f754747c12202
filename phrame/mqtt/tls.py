"""The TLS context for ``mqtts://`` and ``wss://`` brokers, built from the settings.

Called by :mod:`phrame.mqtt.client` before connecting. The server certificate is always
verified (CA file, else the system store) and its host name checked unless
``PHRAME_TLS_VERIFY_HOSTNAME=false``; this module never turns verification off entirely.
"""

from __future__ import annotations

import logging
import socket
import ssl

from phrame.mqtt.errors import SettingsError
from phrame.mqtt.settings import MqttSettings

log = logging.getLogger(__name__)


def build_ssl_context(settings: MqttSettings) -> ssl.SSLContext | None:
    """An SSL context for a TLS URL, ``None`` for a plain one."""
    broker = settings.broker
    if not broker.is_tls:
        if settings.tls_ca or settings.tls_cert:
            log.warning(
                "TLS files are set but %s is not a TLS URL (use mqtts:// or wss://); they are ignored",
                broker.redacted(),
            )
        return None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=settings.tls_ca)
        if settings.tls_cert and settings.tls_key:
            context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as e:
        raise SettingsError(
            f"cannot load TLS files (PHRAME_TLS_CA={settings.tls_ca}, "
            f"PHRAME_TLS_CERT={settings.tls_cert}, PHRAME_TLS_KEY={settings.tls_key}): {e}"
        ) from e
    context.sslsocket_class = _ClosingSSLSocket
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # NOTE: check_hostname must be cleared before verify_mode may change; we keep
    # CERT_REQUIRED either way, so a wrong host name is the only thing ever tolerated.
    context.check_hostname = settings.tls_verify_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if not settings.tls_verify_hostname:
        log.warning("TLS host name check is off for %s", broker.redacted())
    return context


class _ClosingSSLSocket(ssl.SSLSocket):
    """Closes itself when the handshake fails.

    paho wraps the socket and then calls ``do_handshake()``; on a failure (untrusted
    certificate, plain listener) it drops the socket unclosed, so every retry would leak
    a file descriptor until garbage collection.
    """

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


def diagnose(settings: MqttSettings, timeout: float = 3.0) -> str | None:
    """Why a TCP/TLS connection to the broker fails, or ``None`` if it works.

    paho reports no reason for a failed connection attempt; this one extra attempt
    turns "no answer" into "certificate verify failed" or "connection refused".
    """
    broker = settings.broker
    try:
        with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
            context = build_ssl_context(settings)
            if context is not None:
                with context.wrap_socket(sock, server_hostname=broker.host):
                    pass
    except (OSError, SettingsError) as e:
        return str(e)
    return None
