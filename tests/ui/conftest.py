"""Fixtures of the dashboard tests: Debian's Chromium (one profile per module) and pages that
record their console errors. Everything skips with a reason when Chromium is missing, and
fails under PHRAME_REQUIRE_SERVICES=1 (tests.support.browser)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.browser import LAPTOP, PageWatch, launch

Opener = Callable[..., tuple[Any, PageWatch]]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Chromium context with a fresh profile folder, for the module's pages."""
    with launch(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture
def open_page(browser: Any) -> Iterator[Opener]:
    """``open_page(url, viewport=...)``: a new page at ``url`` and its :class:`PageWatch`;
    closed after the test."""
    pages: list[Any] = []

    def opener(url: str, viewport: dict[str, int] | None = None) -> tuple[Any, PageWatch]:
        page = browser.new_page()
        pages.append(page)
        page.set_viewport_size(viewport or LAPTOP)
        page.set_default_timeout(15_000)  # no step waits forever: Playwright raises with the selector
        watch = PageWatch.attach(page)
        page.goto(url)
        return page, watch

    yield opener
    for page in pages:
        page.close()
