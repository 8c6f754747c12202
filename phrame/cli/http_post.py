"""One POST to a running phrame service for the CLI (``replay``, ``promote``, ``rollback``).

Returns the status and body whatever the status (an HTTP error is an answer to print, not an
exception); says on stderr when the service cannot be reached. Never retries: the caller's
user decides.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request


def post(
    command: str, url: str, body: bytes, headers: dict[str, str], *, timeout: float = 10
) -> tuple[int, str] | None:
    """``(status, text)`` of the answer, or None after ``command: cannot reach url: why``."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        try:
            return e.code, e.read().decode(errors="replace")
        finally:
            e.close()
    except (urllib.error.URLError, OSError) as e:
        print(f"{command}: cannot reach {url}: {e}", file=sys.stderr)
        return None
