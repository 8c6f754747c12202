"""Reading, validating and rendering a phrame-config repository (docs/config/format.md).

Used by the ``phrame`` command, config-sync and placement. Pure library: it raises or
returns problems, it never publishes, logs or touches Docker.
"""

from __future__ import annotations

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.loader import load, load_directory, load_git, node_names
from phrame.config_repo.model import ConfigRepo, Document, Environment
from phrame.config_repo.problems import ConfigError, Problem
from phrame.config_repo.render import Rendered, render
from phrame.config_repo.validate import validate

__all__ = [
    "ConfigError",
    "ConfigRepo",
    "Document",
    "Environment",
    "Problem",
    "ReadCache",
    "Rendered",
    "load",
    "load_directory",
    "load_git",
    "node_names",
    "render",
    "validate",
]
