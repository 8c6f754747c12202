"""A stand-in for one child of the fault suite's dev stack, started with some settings changed.

Case 9 runs one node's agent through a partition proxy and placement with a short grace
period. Rather than a second stack, it holds the stack's own child down (``FaultStack.kill``)
and starts the same command with the same settings that ``phrame dev`` gives that child
(:func:`dev_stack.parts.build_children` on the stack's saved settings), plus the overrides;
``argv`` replaces the command when the stand-in needs a test hook built in
(``tests/support/hooked_services.py``). :meth:`StandIn.stop` ends it by its pid and the
caller releases the stack's child. Its log goes to the stack's logs folder
(``<child>.stand-in.log``), so failures show its tail.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from dev_stack.parts import build_children
from dev_stack.settings import DevSettings
from tests.support.dev_stack import DevStackProcess
from tests.support.processes import end

ROOT = Path(__file__).resolve().parents[2]


class StandIn:
    def __init__(
        self,
        stack: DevStackProcess,
        child: str,
        overrides: dict[str, str],
        *,
        argv: list[str] | None = None,
    ) -> None:
        settings = DevSettings.load(stack.state)
        assert settings is not None, f"no stack.json in {stack.state}"
        _which, children = build_children(settings, stack.child_env)
        (self.child,) = [c for c in children if c.name == child]
        self.env = self.child.env | overrides
        self.argv = argv or self.child.argv
        self.log = stack.state / "logs" / f"{child}.stand-in.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,  # where ``python -m tests.support...`` finds the tests package
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """End it by its pid (SIGTERM: its clean stop; SIGKILL after 30 s); its exit code."""
        proc, self.proc = self.proc, None
        return end(proc, sig)
