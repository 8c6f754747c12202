"""Who may write over HTTP, and the record of what they wrote.

:mod:`phrame.auth.tokens` reads a tokens file of hashed, named, scoped tokens
(``PHRAME_TOKENS_FILE``) and checks a bearer token against it in constant time;
:mod:`phrame.auth.audit` keeps the retained audit list (``<prefix>/desired/audit/<writer>``)
and logs every write. Used by config-sync, the topic API and ``phrame token``.
Library code: it never reads the environment; services hand in what their settings read.
"""

from __future__ import annotations

from phrame.auth.audit import AuditLog, audit_entry
from phrame.auth.tokens import (
    SCOPES,
    Holder,
    TokensFileError,
    TokenStore,
    hash_token,
    load_tokens,
    parse_tokens,
)

__all__ = [
    "SCOPES",
    "AuditLog",
    "Holder",
    "TokenStore",
    "TokensFileError",
    "audit_entry",
    "hash_token",
    "load_tokens",
    "parse_tokens",
]
