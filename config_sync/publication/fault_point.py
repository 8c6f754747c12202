"""A TEST-ONLY pause between publishing a commit's items and its manifests.

:meth:`config_sync.publication.sender.DesiredPublisher.publish_commit` calls
:func:`between_items_and_manifests`
after the items step and before the manifests step. With ``PHRAME_TEST_PAUSE_BEFORE_MANIFESTS``
set to a file path, and that file present, config-sync writes ``<path>.reached`` (its pid) and
waits while the file exists, so the fault suite (tests/faults) can SIGKILL it at exactly that
point. Unset (always, outside tests) it does nothing. It never publishes, and never pauses
when the file is absent.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "PHRAME_TEST_PAUSE_BEFORE_MANIFESTS"
POLL_S = 0.05


def between_items_and_manifests() -> None:
    trigger = os.environ.get(ENV)
    if not trigger:
        return
    path = Path(trigger)
    if not path.exists():
        return
    Path(f"{trigger}.reached").write_text(str(os.getpid()))
    while path.exists():  # the test kills us here, or removes the file to let us go on
        time.sleep(POLL_S)
