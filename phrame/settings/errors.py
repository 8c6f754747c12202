"""The one settings error of every phrame part: a ``PHRAME_*`` value (or an option) is missing
or malformed. Permanent: the process refuses to start and says which setting and why.

:class:`phrame.settings.EnvReader` and the shared parsers raise it (or a subclass handed to
them); a service subclasses it under its own root (``config_sync.errors.SettingsError``...)
so its command catches one class, and every settings problem is one kind of error.
"""

from __future__ import annotations


class SettingsError(Exception):
    """A setting is missing or malformed; the message names it and says what is expected."""
