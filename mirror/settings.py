"""Settings of the mirror, read once from ``PHRAME_*`` environment variables.

``phrame mirror`` builds one :class:`MirrorSettings` with :meth:`from_env`; nothing else in
the package reads the environment. MQTT settings come from :class:`phrame.mqtt.MqttSettings`
(the plane's broker). The snapshot folder defaults to ``$PHRAME_STATE_DIR/mirror``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from phrame.mqtt import MqttSettings, SettingsError
from phrame.settings import EnvReader
from phrame.settings.metrics_listen import Listen, read_listen
from phrame.settings.mirror_dir import snapshot_dir

PLANES = ("desired", "actual")


@dataclass(frozen=True)
class MirrorSettings:
    plane: str
    mqtt: MqttSettings
    directory: Path
    directory_is_default: bool = True  # the default one is made private (0700); a given one keeps its mode
    debounce_s: float = 0.25
    max_delay_s: float = 2.0
    # heartbeats alone (no other change) are written at most this often; readers get each
    # one at once from the notices
    heartbeat_delay_s: float = 10.0
    topic_prefix: str = "phrame"
    metrics_listen: Listen | None = None  # PHRAME_METRICS_LISTEN host:port; None: no listener

    @property
    def snapshot_path(self) -> Path:
        return self.directory / f"{self.plane}.json"

    @property
    def topic_filter(self) -> str:
        return f"{self.topic_prefix}/{self.plane}/#"

    @classmethod
    def from_env(cls, plane: str, env: Mapping[str, str] | None = None) -> MirrorSettings:
        if plane not in PLANES:
            raise SettingsError(f"unknown plane {plane!r}; expected desired or actual")
        r = EnvReader(env, error=SettingsError)
        directory, is_default = snapshot_dir(r)
        debounce_ms = r.integer("PHRAME_MIRROR_DEBOUNCE_MS", 250, minimum=1)
        max_delay_ms = r.integer("PHRAME_MIRROR_MAX_DELAY_MS", 2000, minimum=1)
        if max_delay_ms < debounce_ms:
            raise SettingsError(
                f"PHRAME_MIRROR_MAX_DELAY_MS ({max_delay_ms}) must be at least "
                f"PHRAME_MIRROR_DEBOUNCE_MS ({debounce_ms})"
            )
        heartbeat_ms = r.integer("PHRAME_MIRROR_HEARTBEAT_DELAY_MS", 10000, minimum=1)
        if heartbeat_ms < debounce_ms:
            raise SettingsError(
                f"PHRAME_MIRROR_HEARTBEAT_DELAY_MS ({heartbeat_ms}) must be at least "
                f"PHRAME_MIRROR_DEBOUNCE_MS ({debounce_ms})"
            )
        return cls(
            plane=plane,
            mqtt=MqttSettings.from_env(plane, env),
            directory=directory,
            directory_is_default=is_default,
            debounce_s=debounce_ms / 1000,
            max_delay_s=max_delay_ms / 1000,
            heartbeat_delay_s=heartbeat_ms / 1000,
            topic_prefix=r.topic_prefix(),
            metrics_listen=read_listen(r, error=SettingsError),
        )
