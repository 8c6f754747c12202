"""The errors of the GitLab adapter: one root, split into transient and permanent.

Every method of :mod:`phrame.gitlab` converts python-gitlab's errors, and the ``requests``
errors it passes through unwrapped, with :func:`converting`; callers catch
:class:`GitLabError` (or one of its two kinds) and never an SDK class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import requests
from gitlab import exceptions as gl_exc


class GitLabError(Exception):
    """GitLab refused or failed a call. ``status`` is GitLab's HTTP answer (None: there was
    none); ``reason`` is GitLab's own words, or why there was no answer."""

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = message if reason is None else reason


class GitLabUnavailable(GitLabError):
    """No answer, a timeout, a 5xx or a 429: transient, the next pass calls again."""


class GitLabRefused(GitLabError):
    """GitLab answered no (4xx), or the call would write to a tag: permanent until the
    input, the token or the project changes."""


def is_transient(status: int | None) -> bool:
    return status is None or status >= 500 or status == 429


@contextmanager
def converting(what: str, where: str) -> Iterator[None]:
    """Run a call; an SDK or HTTP failure leaves as ``cannot <what> in <where>: <reason>``."""
    try:
        yield
    except gl_exc.GitlabError as e:
        status = e.response_code if isinstance(e.response_code, int) else None
        reason = f"{status} {e.error_message}" if status else str(e.error_message)
        kind = GitLabUnavailable if is_transient(status) else GitLabRefused
        raise kind(f"cannot {what} in {where}: {reason}", status=status, reason=reason) from e
    except requests.RequestException as e:  # python-gitlab passes these through
        reason = f"GitLab unreachable: {type(e).__name__}: {e}"
        raise GitLabUnavailable(f"cannot {what} in {where}: {reason}", reason=reason) from e


def refuse_tag(ref: str, what: str) -> str:
    """``ref`` as GitLab names a branch (``refs/heads/x`` → ``x``); a tag is refused."""
    if ref.startswith("refs/tags/"):
        raise GitLabRefused(f"cannot {what}: {ref} is a tag; phrame never writes to a tag", status=None)
    if ref.startswith("refs/") and not ref.startswith("refs/heads/"):
        raise GitLabRefused(f"cannot {what}: {ref} is not a branch; phrame writes to branches only")
    return ref.removeprefix("refs/heads/")
