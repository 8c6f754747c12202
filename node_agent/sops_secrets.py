"""Decrypting ``env: {KEY: {secret: <file>/<key>}}`` on this node with its age key (``PHRAME_AGE_KEY_FILE``).

Called by ``container_config.resolve_env`` (containers and host processes) each time an item
is created or started, and by the log masking. The item carries ciphertext only (its
``secrets`` field: the SOPS file's age stanzas and the values it refers to); the value is
decrypted here, handed to Docker or the process, and never logged, reported or kept on
disk by the agent. A failure is a :class:`SpecError` for that one item naming the
reference, never the value.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from node_agent.errors import SpecError
from phrame.sops.keys import AgeKeys
from phrame.sops.values import SecretError, data_key, decrypt_value

MAX_CACHED_KEYS = 256  # data keys of SOPS files (per age stanza): one X25519 per file, not per value


class SopsSecrets:
    """This node's age keys, and the data keys of the SOPS files they opened."""

    def __init__(self, keys: AgeKeys | None) -> None:
        self.keys = keys
        self._data_keys: dict[tuple[tuple[str, str], ...], bytes] = {}
        self._lock = threading.Lock()

    def _data_key(self, stanzas: Any) -> bytes:
        assert self.keys is not None
        if not isinstance(stanzas, list):
            raise SecretError("the item has no age stanzas for its SOPS file")
        cache_key = tuple(
            (str(s.get("recipient")), str(s.get("enc"))) for s in stanzas if isinstance(s, Mapping)
        )
        with self._lock:
            found = self._data_keys.get(cache_key)
        if found is None:
            found = data_key([s for s in stanzas if isinstance(s, Mapping)], self.keys)
            with self._lock:
                if len(self._data_keys) >= MAX_CACHED_KEYS:
                    self._data_keys.clear()
                self._data_keys[cache_key] = found
        return found

    def value(self, secrets: Any, ref: str) -> str:
        """The plaintext of reference ``ref`` (``db/password``) from an item's ``secrets``."""
        file, _, key_path = ref.partition("/")
        if self.keys is None:
            raise SpecError(
                f"secret {ref}: PHRAME_AGE_KEY_FILE is not set on this node, so it cannot decrypt"
            )
        entry = secrets.get(file) if isinstance(secrets, Mapping) else None
        values = entry.get("values") if isinstance(entry, Mapping) else None
        enc = values.get(key_path) if isinstance(values, Mapping) else None
        if not isinstance(enc, str) or not key_path or not isinstance(entry, Mapping):
            raise SpecError(f"secret {ref}: the item carries no encrypted value for it")
        try:
            return decrypt_value(self._data_key(entry.get("age")), enc, key_path.split("/"))
        except SecretError as e:
            raise SpecError(f"secret {ref}: cannot decrypt: {e}") from None


NO_SOPS = SopsSecrets(None)
