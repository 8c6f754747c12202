"""Reading ``PHRAME_*`` settings, setting up logs and private state, the same way in every service.

Each service's ``settings.py`` builds its one settings object with :class:`EnvReader`, raising
:class:`SettingsError` (a service subclasses it) and parsing addresses with :func:`parse_host_port`;
its ``__main__``/sub-command calls :func:`setup_logging` (and, with state on disk,
:func:`use_private_umask`; :func:`private_dir` where it creates its folder), and an HTTP
service serves through ``http_serving`` (limits) and reads bodies with ``http_body``.
Library code: it never reads the environment on import; only the server it runs logs
(once per condition).
"""

from __future__ import annotations

from phrame.settings.env import EnvReader
from phrame.settings.errors import SettingsError
from phrame.settings.listen import Listen, parse_host_port
from phrame.settings.logs import setup_logging
from phrame.settings.state import private_dir, use_private_umask

__all__ = [
    "EnvReader",
    "Listen",
    "SettingsError",
    "parse_host_port",
    "private_dir",
    "setup_logging",
    "use_private_umask",
]
