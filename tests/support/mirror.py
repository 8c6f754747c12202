"""A mirror loop running in a thread against a test broker (tests and ``benchmarks/mirror_burst.py``).

Starts :class:`mirror.loop.MirrorLoop` for one plane, yields it, stops it and its client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mirror.loop import MirrorLoop
from mirror.settings import MirrorSettings
from phrame.mqtt import MqttSettings


def mirror_settings(
    url: str,
    folder: Path,
    *,
    debounce_s: float = 0.25,
    max_delay_s: float = 2.0,
    heartbeat_delay_s: float = 10.0,
) -> MirrorSettings:
    return MirrorSettings(
        plane="actual",
        mqtt=MqttSettings(url=url, reconnect_max_s=1),
        directory=folder,
        directory_is_default=False,
        debounce_s=debounce_s,
        max_delay_s=max_delay_s,
        heartbeat_delay_s=heartbeat_delay_s,
    )


@contextmanager
def running_mirror(settings: MirrorSettings) -> Iterator[MirrorLoop]:
    loop = MirrorLoop(settings)
    loop.start()
    thread = threading.Thread(target=loop.serve, name="mirror", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.stop()
        thread.join(10)
        loop.client.stop()
