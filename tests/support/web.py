"""Reading a page served by a test container that may be replaced while it answers."""

from __future__ import annotations

import http.client
import urllib.request


def page_text(url: str, timeout: float = 1.0) -> str:
    """The body at ``url``, or "" while nothing answers it completely.

    A container stopped in the middle of its answer cuts the body short: that is
    :class:`http.client.IncompleteRead` (or a bad status line), which is not an
    :class:`OSError`, and a poll must read it as "not yet", not fail on it.
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return str(r.read().decode())
    except (OSError, http.client.HTTPException):
        return ""
