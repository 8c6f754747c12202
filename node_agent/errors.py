"""Exceptions of the node agent: one root, split by what the caller should do.

Adapters raise these (converted from SDK errors with ``raise ... from e``); the loop logs
them per item and carries on, so one failing item never stops the others.
"""

from __future__ import annotations

import re

import phrame.settings
from phrame.runtime import TemporaryError


class AgentError(Exception):
    """Root of every error the node agent raises on purpose."""


class SettingsError(AgentError, phrame.settings.SettingsError):
    """A ``PHRAME_*`` setting is missing or malformed."""


class DockerError(AgentError):
    """A Docker call failed; the temporary kinds below are retried with backoff."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status  # HTTP status of the Docker API answer, 0 when none


class DockerBusy(DockerError, TemporaryError):
    """Docker answered with a server error that may pass (not a port taken, no such image)."""


class DockerUnreachable(DockerError, TemporaryError):
    """No answer from the Docker daemon: connection refused or lost, or a timeout."""


class NotFound(DockerError):
    """The object (container, network, image) does not exist."""


class NameConflict(DockerError):
    """The name is taken by an object the agent does not manage; it is never touched."""


class NetworkInUse(DockerError):
    """Docker refused to remove a network that still has endpoints: it is left for later."""


class SpecError(AgentError):
    """A desired spec cannot be turned into a Docker object (e.g. unreadable env file)."""


class ProcessError(AgentError):
    """A supervised host process could not be started or stopped."""


class RecordError(ProcessError):
    """A host process's record could not be saved in the state folder (a full disk): it is
    not run until it can be, so no process runs that a restarted agent would not know."""


# An error quotes what it refuses: a refused 1 MiB payload must not make a 1 MiB line in the
# node status (sent at every pass) or the log. The end says what is wrong, so the cut is in
# the middle.
MAX_ERROR_CHARS = 1000
# what is no text (YAML 1.2's printable set, as phrame.config_repo.problems): a lone surrogate in
# a key cannot be encoded as UTF-8 (the status would fail to publish), ESC would reach the
# terminal reading the log
_NOT_TEXT = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def printable(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` with what is no text escaped, cut in the middle to at most ``limit`` characters."""
    text = _NOT_TEXT.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "…" + text[-keep:]
