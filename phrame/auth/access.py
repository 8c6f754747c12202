"""The one decision of an HTTP credential: who is asking, and may they do this?

:func:`check_access` takes the bearer token given, the scope the request needs, the tokens
file's store (if any) and the legacy single secrets a service still honours (config-sync's
webhook secret when there is no tokens file, the topic API's ``PHRAME_API_TOKEN``: each an
implicit holder with its scopes). Pure apart from the store's re-read of its file; compared
in constant time. Callers turn the answer into 401 (unknown) or 403 (known, lacking the scope).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from phrame.auth.tokens import Holder, TokenStore


@dataclass(frozen=True)
class Legacy:
    """A single shared secret honoured as the holder ``name`` with ``scopes``."""

    name: str
    secret: str
    scopes: frozenset[str]


@dataclass(frozen=True)
class Access:
    holder: Holder | None  # who asked (None: nobody known)
    status: int  # 200 allowed, 401 unknown or missing token, 403 known but not allowed
    why: str = ""

    @property
    def is_allowed(self) -> bool:
        return self.status == 200

    @property
    def who(self) -> str:
        return self.holder.name if self.holder is not None else "anonymous"


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def identify(token: str | None, *, store: TokenStore | None, legacy: Sequence[Legacy] = ()) -> Holder | None:
    """The holder of ``token``: from the tokens file first, else a legacy secret."""
    if not token:
        return None
    found = store.holder(token) if store is not None else None
    for item in legacy:  # every secret compared, whatever matched before
        if _same(item.secret, token) and found is None:
            found = Holder(item.name, item.scopes)
    return found


def check_access(
    token: str | None, scope: str, *, store: TokenStore | None, legacy: Sequence[Legacy] = ()
) -> Access:
    """May the bearer of ``token`` do what needs ``scope``?"""
    if not token:
        return Access(None, 401, "missing token: send Authorization: Bearer <token>")
    holder = identify(token, store=store, legacy=legacy)
    if holder is None:
        return Access(None, 401, "token does not match")
    if not holder.may(scope):
        have = ", ".join(sorted(holder.scopes))
        return Access(holder, 403, f"token of {holder.name} has scope(s) {have}; this needs {scope}")
    return Access(holder, 200)
