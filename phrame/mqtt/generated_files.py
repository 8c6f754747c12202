"""Files a generator owns, told apart from everyone else's before anything is overwritten.

``phrame.mqtt.broker_config.write_broker_config`` starts each file it writes with a line
holding the sha256 of the text below it. A later run may replace a file that is absent, its
own unedited output, or already what it would write; anything else (a distribution's
``mosquitto.conf``, a hand-written ACL, a generated file edited since) is kept unless the
caller forces. All files are checked before any is written, so a refusal changes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from phrame.mqtt.errors import SettingsError

GENERATOR = "phrame broker-config"
_STAMP = re.compile(r"^# sha256 of the lines below \(checked before .+ rewrites this file\): ([0-9a-f]{64})$")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stamped(text: str) -> str:
    """``text`` (ending in a newline) after the line that marks it as the generator's own.

    A first line, not a last one: as the last line, after the listeners or a bridge block,
    the same comment stopped messages crossing a bridge under mosquitto 2.0.11
    (tests/integration/test_bridged_brokers.py); as the first line it does not."""
    body = text if text.endswith("\n") else text + "\n"
    stamp = f"# sha256 of the lines below (checked before {GENERATOR} rewrites this file): {_digest(body)}"
    return f"{stamp}\n{body}"


def is_generated(text: str) -> bool:
    """Whether ``text`` is a stamped file unchanged since it was written."""
    first, _, body = text.partition("\n")
    found = _STAMP.match(first)
    return found is not None and found.group(1) == _digest(body)


def refused(files: Mapping[Path, str]) -> list[Path]:
    """The paths among ``files`` (path -> new text) that hold something else than the
    generator's own output: a run must not replace them unless forced."""
    out = []
    for path, text in files.items():
        if not path.exists():
            continue
        old = path.read_bytes().decode("utf-8", errors="replace")
        # the same text without the stamp: written before files were stamped, never edited
        unstamped = text.partition("\n")[2]
        if old not in (text, unstamped) and not is_generated(old):
            out.append(path)
    return out


def check_replaceable(files: Mapping[Path, str], *, force: bool) -> None:
    """Raise :class:`SettingsError` naming every file a run would destroy, unless ``force``."""
    kept = [] if force else refused(files)
    if kept:
        names = ", ".join(str(p) for p in kept)
        raise SettingsError(
            f"refusing to replace {names}: not written by {GENERATOR}, or edited since"
            f" (or written by an older {GENERATOR}, before it stamped its files, for another"
            " inventory). Move it away, or pass --force to overwrite it"
        )
