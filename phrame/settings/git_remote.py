"""How the config repo's remote reaches git, the same way for config-sync and placement.

The git adapter (``phrame.git``) builds one :class:`GitRemote` from PHRAME_REPO_URL: credentials
pasted into the URL (``https://oauth2:TOKEN@host/x.git``) are cut out of it, so git's argv,
the clone cache's ``config`` and every message see the plain URL, and travel in git's
environment like PHRAME_GITLAB_TOKEN. Every git error and log line goes through
:func:`redact`. :func:`follow_origin` points the cache's ``origin`` at the setting; it is
the only function here that runs git (``git config``/``git remote`` on the cache, never
the network). Nothing here logs.
"""

from __future__ import annotations

import base64
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

HIDDEN = "***"
MIN_SECRET = 8  # shorter strings (a user name like "git") are hidden only inside URLs
# scheme://userinfo@ in any text; userinfo runs to the last "@" before the path
_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^/?#\s'\"<>@]*(?:@[^/?#\s'\"<>@]*)*)@"
)
_HTTP = ("http", "https")


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without credentials: URL user info and each of ``secrets`` become ``***``.

    An HTTP(S) URL loses all its user info (a token can be the user name); another
    scheme keeps its user (``ssh://git@host``) and loses a password.
    """

    def hide(m: re.Match[str]) -> str:
        scheme, userinfo = m["scheme"], m["userinfo"]
        if scheme.lower() in _HTTP:
            shown = HIDDEN
        elif ":" in userinfo:
            shown = f"{userinfo.partition(':')[0]}:{HIDDEN}"
        else:
            shown = userinfo
        return f"{scheme}://{shown}@"

    text = _USERINFO.sub(hide, text)
    for secret in secrets:
        if len(secret) >= MIN_SECRET:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, HIDDEN)
    return text


def split_credentials(url: str) -> tuple[str, str | None]:
    """``(url without credentials, "user:password" or None)``.

    Only HTTP(S) credentials can be used (as HTTP Basic); a password in another scheme's
    URL is dropped (git over SSH never uses it), its user kept. Paths and scp-like
    ``git@host:x.git`` are returned as they are.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if not parts.scheme or "@" not in parts.netloc or len(parts.scheme) == 1:  # C:\ is a path
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, has_password, password = userinfo.partition(":")
    if parts.scheme.lower() in _HTTP:
        clean = urlunsplit(parts._replace(netloc=hostport))
        return clean, f"{unquote(user)}:{unquote(password)}"
    if has_password:
        return urlunsplit(parts._replace(netloc=f"{user}@{hostport}")), None
    return url, None


@dataclass(frozen=True)
class GitRemote:
    """The remote as git must see it (``url``, never with credentials) and what it sends."""

    url: str
    credentials: str | None = field(default=None, repr=False)  # "user:password" from the URL
    token: str | None = field(default=None, repr=False)  # PHRAME_GITLAB_TOKEN (git_host gitlab)
    ca_file: str | Path | None = None

    @classmethod
    def parse(cls, url: str, *, token: str | None = None, ca_file: str | Path | None = None) -> GitRemote:
        clean, credentials = split_credentials(url.strip())
        return cls(clean, credentials, token, ca_file)

    @property
    def secrets(self) -> tuple[str, ...]:
        user, _, password = (self.credentials or "").partition(":")
        basic = self._basic()
        return tuple(s for s in (password, user if password == "" else "", self.token, basic) if s)

    def env(self) -> dict[str, str]:
        """git's environment for this remote: no prompt, the CA, credentials as HTTP Basic."""
        env = {"GIT_TERMINAL_PROMPT": "0"}
        if self.ca_file:
            # the variable, not http.sslCAInfo: an inherited GIT_SSL_CAINFO would override that
            env["GIT_SSL_CAINFO"] = str(self.ca_file)
        basic = self._basic()
        if basic:
            env.update(
                GIT_CONFIG_COUNT="1",
                GIT_CONFIG_KEY_0="http.extraHeader",
                GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}",
            )
        return env

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def _basic(self) -> str | None:
        # the URL's own credentials are the more specific: they win over the token setting
        pair = self.credentials or (f"oauth2:{self.token}" if self.token else None)
        return base64.b64encode(pair.encode()).decode() if pair else None


def follow_origin(git_dir: Path, remote: GitRemote) -> str | None:
    """Make the cache's ``origin`` fetch from ``remote.url``; the redacted old URL when it
    pointed elsewhere (or held credentials), ``None`` when nothing changed or it was new."""
    found = subprocess.run(
        ["git", "--git-dir", str(git_dir), "config", "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    )
    old = found.stdout.strip() if found.returncode == 0 else None
    if old == remote.url:
        return None
    if remote.url.startswith("-"):
        raise OSError(f"{redact(remote.url)!r} is not a repository URL")
    verb = ["add"] if old is None else ["set-url"]
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "remote", *verb, "origin", remote.url],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"cannot point origin of {git_dir} at {remote.url}: {redact(done.stderr.strip())}")
    return None if old is None else redact(old, remote.secrets)


def hint(text: str, scope: str) -> str:
    """What to do about the two failures an HTTPS remote adds (credentials, trust), or ``""``."""
    if "could not read Username" in text or "Authentication failed" in text or " 401" in text:
        return (
            f" (the server refused the credentials: check PHRAME_GITLAB_TOKEN, or those in"
            f" PHRAME_REPO_URL, and their {scope} scope)"
        )
    if "certificate" in text and ("verif" in text or "problem" in text):
        return (
            " (the server's TLS certificate is not trusted: set PHRAME_GIT_CA_FILE to the CA that signed it)"
        )
    return ""
