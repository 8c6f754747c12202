"""Contracts shared by every Phrame part: JSON Schemas, the topic layout and digests.

Everyone imports from here; this package imports no service package. Schemas live as
draft 2020-12 JSON files under ``schemas/json`` so other languages can use them too.
"""

from __future__ import annotations

from schemas.canonical import MAX_JSON_DEPTH, canonical_json, digest, load_json
from schemas.registry import SCHEMA_NAMES, PayloadError, check_payload, schema, validator
from schemas.topics import Topic, Topics

__all__ = [
    "MAX_JSON_DEPTH",
    "SCHEMA_NAMES",
    "PayloadError",
    "Topic",
    "Topics",
    "canonical_json",
    "check_payload",
    "digest",
    "load_json",
    "schema",
    "validator",
]
