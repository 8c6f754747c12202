"""Where the mirror's snapshot files live: one rule for the writer and its readers.

``mirror.settings`` (the writer) and ``topic_api.settings`` (a reader) call
:func:`snapshot_dir`, so both find ``PHRAME_MIRROR_DIR`` or ``$PHRAME_STATE_DIR/mirror``
the same way. Reads settings only; never creates the folder.
"""

from __future__ import annotations

from pathlib import Path

from phrame.settings.env import EnvReader

DEFAULT_STATE_DIR = "/var/lib/phrame"


def snapshot_dir(r: EnvReader) -> tuple[Path, bool]:
    """(the snapshot folder, whether it is the default one under the state dir)."""
    given = r.path("PHRAME_MIRROR_DIR")
    if given is not None:
        return given, False
    state = r.path("PHRAME_STATE_DIR", DEFAULT_STATE_DIR) or Path(DEFAULT_STATE_DIR)
    return state / "mirror", True
