"""How a GitLab token and a private CA reach git, the same way for config-sync and placement.

Both ``git_repo`` adapters pass :func:`remote_env` to every fetch and push, so the token
travels in git's environment (never argv, never the URL on disk), and add :func:`hint` to
their errors. Pure: it never runs git and never logs.
"""

from __future__ import annotations

import base64
from pathlib import Path


def remote_env(token: str | None, ca_file: str | Path | None) -> dict[str, str]:
    """git's environment for a remote: no prompt, the CA, the token as HTTP Basic ``oauth2``."""
    env = {"GIT_TERMINAL_PROMPT": "0"}
    if ca_file:
        # the variable, not http.sslCAInfo: an inherited GIT_SSL_CAINFO would override that
        env["GIT_SSL_CAINFO"] = str(ca_file)
    if token:  # GitLab: HTTP Basic, user oauth2, the token as password
        basic = base64.b64encode(f"oauth2:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}",
        )
    return env


def hint(text: str, scope: str) -> str:
    """What to do about the two failures an HTTPS remote adds (credentials, trust), or ``""``."""
    if "could not read Username" in text or "Authentication failed" in text or " 401" in text:
        return f" (the server refused the credentials: check PHRAME_GITLAB_TOKEN and its {scope} scope)"
    if "certificate" in text and ("verif" in text or "problem" in text):
        return (
            " (the server's TLS certificate is not trusted: set PHRAME_GIT_CA_FILE to the CA that signed it)"
        )
    return ""
