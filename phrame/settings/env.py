"""The one reader of ``PHRAME_*`` settings: typed reads of environment variables; a bad value
raises :class:`~phrame.settings.errors.SettingsError` (or the caller's subclass) naming it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from phrame.settings.errors import SettingsError

DEFAULT_TOPIC_PREFIX = "phrame"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class EnvReader:
    """Reads settings from ``env`` (default ``os.environ``); an empty value counts as unset.

    ``error`` is the exception class raised for a bad value: :class:`SettingsError`, or a
    service's subclass of it under its own root exception.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, *, error: type[Exception] = SettingsError
    ) -> None:
        self.env = os.environ if env is None else env
        self.error = error

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.env.get(name, "").strip()
        return value or default

    def topic_prefix(self) -> str:
        """``PHRAME_TOPIC_PREFIX``, the first level of every topic (its form is checked where
        topics are built, by ``schemas.Topics``)."""
        return self.text("PHRAME_TOPIC_PREFIX", DEFAULT_TOPIC_PREFIX) or DEFAULT_TOPIC_PREFIX

    def required(self, name: str, what: str) -> str:
        """``name``'s value; unset or empty raises the error, saying ``what`` it should hold."""
        value = self.text(name)
        if value is None:
            raise self.error(f"{name} is required ({what})")
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.text(name, default) or default
        if value not in choices:
            raise self.error(f"{name}={value!r} must be one of {', '.join(choices)}")
        return value

    def number(self, name: str, default: float, *, minimum: float = 0.0) -> float:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise self.error(f"{name}={raw!r} is not a number") from None
        if value < minimum:
            raise self.error(f"{name}={raw!r} must be at least {minimum:g}")
        return value

    def integer(self, name: str, default: int, *, minimum: int = 0) -> int:
        value = self.number(name, default, minimum=minimum)
        if value != int(value):
            raise self.error(f"{name}={self.text(name)!r} must be a whole number")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        value = (self.text(name) or "").lower()
        if not value:
            return default
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise self.error(f"{name} must be true or false, not {value!r}")

    def path(self, name: str, default: str | None = None) -> Path | None:
        value = self.text(name, default)
        return Path(value) if value else None

    def secret(self, name: str) -> str | None:
        """``NAME``, or the content of the file named by ``NAME_FILE`` (one trailing newline cut)."""
        value, path = self.env.get(name) or None, self.text(f"{name}_FILE")
        if value and path:
            raise self.error(f"set either {name} or {name}_FILE, not both")
        if path is None:
            return value
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise self.error(f"{name}_FILE: cannot read {path}: {e.strerror}") from e
        return text.removesuffix("\n").removesuffix("\r")
