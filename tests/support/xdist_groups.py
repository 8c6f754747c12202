"""Which tests pytest-xdist must run together on one worker, in file order (``--dist loadgroup``).

tests/conftest.py hands :class:`GroupScheduling` to xdist as its scheduler. The fault suite
shares one stack across its files; each e2e module builds on one stack case after case; a
module with a module- or package-scoped fixture shares that fixture (and some of its cases
read what an earlier one left, e.g. retained messages). Every other test goes to whichever
worker is free. Never splits a group; never reorders a group's tests.

xdist's own ``xdist_group`` marker cannot be used: it renames ``item._nodeid``, which pytest 9
no longer reads (measured with pytest 9.2 and pytest-xdist 3.8: every test ran ungrouped).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

#: one worker runs these one after another: the fault suite (one stack for all its files), and
#: the modules that each start a whole ``phrame dev`` stack (two at once on 2 cores starve
#: each other's timing: measured, every rollout case failed with four stacks at once)
LANES = {"tests/faults/": "faults", "tests/e2e/": "stacks", "tests/ui/test_dashboard.py": "stacks"}
#: each module on one worker (a browser per module, cases in order)
ONE_WORKER_PER_MODULE = ("tests/ui/",)
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\(\s*scope\s*=\s*["'](module|package)["']""")


@functools.cache
def shares_a_fixture(module: Path) -> bool:
    """Whether the test module defines a module- or package-scoped fixture."""
    try:
        return SHARED_FIXTURE.search(module.read_text()) is not None
    except OSError:
        return False


def group_of(nodeid: str, rootdir: Path) -> str:
    """The unit of work ``nodeid`` belongs to: a lane, a module, or the test itself."""
    module = nodeid.split("::", 1)[0]
    for prefix, lane in LANES.items():
        if module.startswith(prefix):
            return lane
    if module.startswith(ONE_WORKER_PER_MODULE) or shares_a_fixture(rootdir / module):
        return module
    return nodeid


class GroupScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling with :func:`group_of` as the scope: the largest groups
    start first, a worker that finishes a group takes the next one."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid, Path(self.config.rootpath))
