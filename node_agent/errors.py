"""Exceptions of the node agent: one root, split by what the caller should do.

Adapters raise these (converted from SDK errors with ``raise ... from e``); the loop logs
them per item and carries on, so one failing item never stops the others.
"""

from __future__ import annotations


class AgentError(Exception):
    """Root of every error the node agent raises on purpose."""


class SettingsError(AgentError):
    """A ``PHRAME_*`` setting is missing or malformed."""


class DockerError(AgentError):
    """A Docker call failed. ``transient`` errors are retried with backoff."""

    def __init__(self, message: str, *, transient: bool = False, status: int = 0) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status  # HTTP status of the Docker API answer, 0 when none


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
