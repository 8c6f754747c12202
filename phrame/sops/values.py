"""Decrypting one SOPS value with an age key, as SOPS itself does (no ``sops`` process).

SOPS encrypts a file's values with one random 256-bit data key; each age recipient gets
that key age-encrypted (ASCII-armored) in ``sops.age[].enc``. A value is
``ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<t>]``: AES-256-GCM with a 32-byte
nonce, authenticated with the value's mapping keys joined by ``:`` plus a final ``:`` as
additional data (so a value moved to another key fails). :class:`SecretError` messages
never carry a plaintext or a key.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyrage
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from phrame.sops.keys import AgeKeys

_ENC = re.compile(
    r"ENC\[AES256_GCM,data:(?P<data>[A-Za-z0-9+/=]*),iv:(?P<iv>[A-Za-z0-9+/=]+),"
    r"tag:(?P<tag>[A-Za-z0-9+/=]+),type:(?P<type>str|int|float|bool)\]"
)
_ARMOR_BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----"
_ARMOR_END = "-----END AGE ENCRYPTED FILE-----"


class SecretError(Exception):
    """A value that cannot be decrypted; the message says why, never what."""


def _dearmor(text: str) -> bytes:
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) < 2 or lines[0] != _ARMOR_BEGIN or lines[-1] != _ARMOR_END:
        raise SecretError("an age stanza is not ASCII-armored age data")
    try:
        return base64.b64decode("".join(lines[1:-1]), validate=True)
    except binascii.Error:
        raise SecretError("an age stanza is not valid base64") from None


def data_key(stanzas: Iterable[Mapping[str, Any]], keys: AgeKeys) -> bytes:
    """The file's data key, from the stanza for one of ``keys``' recipients."""
    stanzas = list(stanzas)
    mine = [s for s in stanzas if s.get("recipient") in keys.recipients]
    if not mine:
        have = ", ".join(sorted(keys.recipients))
        raise SecretError(f"the file is not encrypted for this node's age key ({have})")
    for stanza in mine:
        try:
            key = pyrage.decrypt(_dearmor(str(stanza.get("enc", ""))), list(keys.identities))
        except pyrage.DecryptError:
            continue
        if len(key) == 32:
            return bytes(key)
    raise SecretError("the age stanza for this node's key does not decrypt to a SOPS data key")


def decrypt_value(key: bytes, enc: str, path: Sequence[str]) -> str:
    """The text of the SOPS value ``enc`` found at mapping keys ``path``."""
    m = _ENC.fullmatch(enc)
    if m is None:
        raise SecretError("the value is not a SOPS ENC[AES256_GCM,...] value")
    try:
        data, iv, tag = (base64.b64decode(m[g], validate=True) for g in ("data", "iv", "tag"))
    except binascii.Error:
        raise SecretError("the value's data, iv or tag is not valid base64") from None
    if len(iv) < 8 or len(tag) != 16:
        raise SecretError("the value's iv or tag has the wrong length")
    additional = ("".join(f"{k}:" for k in path)).encode()
    try:
        plain = AESGCM(key).decrypt(iv, data + tag, additional)
    except InvalidTag:
        raise SecretError("the value does not authenticate (wrong key, or changed or moved)") from None
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError("the value is not UTF-8 text") from None
