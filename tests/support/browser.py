"""Debian's Chromium driven by Playwright for Python, for the dashboard tests (tests/ui).

:func:`launch` starts ``/usr/bin/chromium`` (the Debian package; Playwright never downloads
a browser here: no ``playwright install``) headless with a fresh profile folder, and
:class:`PageWatch` records what a page says on its console, its uncaught errors and the
requests that failed, so a test can require a clean page. Screenshots go to ``out/ui/``
(git-ignored), kept as the run's artifacts. Skips with a reason when Chromium or Playwright
is missing, and fails instead under ``PHRAME_REQUIRE_SERVICES=1`` (tests.support.services).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.services import require, require_binary
from tests.support.waiting import wait_for

ROOT = Path(__file__).parents[2]
SCREENSHOTS = ROOT / "out" / "ui"
CHROMIUM_ARGS = [
    "--no-sandbox",  # runs as root in CI; the page is our own, served from 127.0.0.1
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no traffic but to 127.0.0.1
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}


def chromium_path() -> str:
    path = require_binary("chromium", "chromium (scripts/install-deps --ui)")
    try:  # a chromium that cannot start is as good as none; say why
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        ok, why = done.returncode == 0, (done.stdout + done.stderr).strip()[-300:]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, str(e)
    require(ok, f"{path} --version failed: {why}")
    return path


@contextlib.contextmanager
def launch(profile: Path, viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """A Playwright browser context on Debian's Chromium with a fresh profile in ``profile``."""
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "the PyPI package playwright is missing (scripts/install-deps)")
        raise
    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=viewport or LAPTOP,
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class PageWatch:
    """What went wrong on a page: console errors, uncaught exceptions, failed requests."""

    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @classmethod
    def attach(cls, page: Any) -> PageWatch:
        watch = cls()
        page.on("console", lambda m: watch.console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: watch.errors.append(str(e)))
        # an event stream cut by the page's own close is no failure of the page
        page.on(
            "requestfailed",
            lambda r: None if r.url.endswith("/api/events") else watch.failed.append(f"{r.method} {r.url}"),
        )
        return watch

    def problems(self) -> list[str]:
        return [
            *(f"console error: {m}" for m in self.console),
            *(f"uncaught: {e}" for e in self.errors),
            *(f"request failed: {r}" for r in self.failed),
        ]


def wait_js(
    page: Any,
    expression: str,
    what: str,
    *,
    arg: Any = None,
    timeout: float = 15.0,
    observe: str | None = None,
) -> Any:
    """Poll ``page.evaluate(expression, arg)`` until it is truthy. Instead of Playwright's
    ``wait_for_function``, which evaluates its predicate with ``new Function`` inside the
    page: the topic API's Content-Security-Policy refuses that (``evaluate`` goes through
    the DevTools protocol, which the policy does not govern). ``observe``: an expression
    whose value a timeout names (what the page showed instead)."""
    seen = (lambda: page.evaluate(observe)) if observe else None
    return wait_for(lambda: page.evaluate(expression, arg), what, timeout, interval=0.05, observe=seen)


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
