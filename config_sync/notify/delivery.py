"""The HTTP adapter of notifications: read a target's URL from its file, POST one body.

:class:`~config_sync.notify.outbox.Outbox` calls :meth:`HttpDelivery.deliver` on its own
thread, once per attempt. The URL is a secret: it is read from ``PHRAME_NOTIFY_SECRETS_DIR``
at each attempt (a rotated file takes effect at once), never logged (errors name the target
and the URL's host only) and never followed to another place (no redirects). A failure a
retry may fix (no answer, 5xx, 408, 429) is a :class:`TemporaryError`, any other a
:class:`PermanentError`.
"""

from __future__ import annotations

import http.client
import os
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from phrame.runtime import PermanentError, TemporaryError

MAX_URL_BYTES = 4096
RETRYABLE = frozenset({408, 425, 429})
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class Delivery(Protocol):
    def deliver(self, url_file: str, body: bytes, *, target: str) -> None: ...


def read_url(secrets_dir: Path, name: str) -> str:
    """The URL in file ``name`` of ``secrets_dir`` (a regular file, at most 4 KiB, one line)."""
    if not name or "/" in name or name in (".", ".."):
        raise PermanentError(f"{name!r} is no file name")
    path = secrets_dir / name
    try:
        fd = os.open(path, _FLAGS)
    except OSError as e:
        raise PermanentError(f"cannot read {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PermanentError(f"cannot read {path}: not a regular file")
        data = os.read(fd, MAX_URL_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_URL_BYTES:
        raise PermanentError(f"{path} holds more than {MAX_URL_BYTES} bytes; it must hold one URL")
    try:
        url = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise PermanentError(f"{path} is not UTF-8 text") from None
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname or "\n" in url:
        raise PermanentError(f"{path} does not hold one http:// or https:// URL")
    return url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is an answer: the body is never sent somewhere else


class HttpDelivery:
    """POSTs with the standard library (proxies from the usual ``HTTPS_PROXY``/``NO_PROXY``)."""

    def __init__(self, secrets_dir: Path, *, timeout_s: float = 5.0) -> None:
        self.secrets_dir, self.timeout_s = secrets_dir, timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)

    def deliver(self, url_file: str, body: bytes, *, target: str) -> None:
        url = read_url(self.secrets_dir, url_file)
        host = urlsplit(url).hostname
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": "phrame-config-sync"},
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                response.read(65536)
        except urllib.error.HTTPError as e:
            e.close()
            what = f"{target} ({host}) answered {e.code}"
            if e.code >= 500 or e.code in RETRYABLE:
                retry_after = _seconds(e.headers.get("Retry-After") if e.headers else None)
                raise TemporaryError(what, delay=retry_after) from None
            raise PermanentError(what) from None
        # refused, reset, timed out, TLS, or an answer that is no HTTP: all may pass
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise TemporaryError(f"{target} ({host}) unreachable: {reason}") from None


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (an HTTP date is left to the backoff)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
