"""Small disks under the fault stack: tmpfs folders over its agents' and mirrors' state.

``conftest.py`` mounts them before ``phrame dev`` starts (so every part writes there from
its first write) and unmounts them after the stack is down; case 8 fills them. Where
mounting is not allowed, nothing is mounted, the other cases run as before and case 8 is
skipped with :attr:`StateDisks.why` (failed under ``PHRAME_REQUIRE_SERVICES=1``).
It never unmounts what it did not mount.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.tmpfs import mount, unmount

#: room for the quickstart's and the suite's snapshots (two planes, each written beside the
#: last one) and the agents' process records, many times over; filled whole by case 8
SIZE = "4m"


class StateDisks:
    def __init__(self, state: Path) -> None:
        # dev_stack.settings: agents/<node> is each agent's PHRAME_STATE_DIR, mirror/ the
        # mirrors' PHRAME_MIRROR_DIR (both planes' snapshots, read by the topic API)
        self.agents, self.mirror = state / "agents", state / "mirror"
        self.mounted: list[Path] = []
        self.why: str | None = None
        for folder in (self.agents, self.mirror):
            self.why = mount(folder, SIZE)
            if self.why is not None:
                self.unmount()
                break
            self.mounted.append(folder)

    def unmount(self) -> None:
        while self.mounted:
            unmount(self.mounted.pop())
