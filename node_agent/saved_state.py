"""The last complete desired state this node converged to, kept on disk for a start without a broker.

The loop calls :meth:`SavedState.save` after a pass that converged on a complete view (a
manifest and every item it lists, each with the manifest's digest) and :meth:`SavedState.load`
when the agent starts and no broker answers within ``PHRAME_OFFLINE_START_S``. The file
(``<PHRAME_STATE_DIR>/desired/<node>.json``, 0600 in a 0700 folder) holds the content (with
when it was saved) and a SHA-256 checksum of its canonical JSON; loading checks the checksum,
the node, each item's schema and that each item's own digest is the manifest's. It never
saves a partial view and never hands back a file that fails a check (:class:`SavedStateError`
says which).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from node_agent.models import DesiredState, Manifest
from phrame.settings.state import private_dir
from schemas import PayloadError, check_payload, load_json
from schemas.canonical import canonical_json, digest

log = logging.getLogger(__name__)

FORMAT = 1
KINDS = {"containers": "desired-container", "networks": "desired-network", "processes": "desired-process"}
MAX_BYTES = 64 << 20  # far above any node's desired state; a bigger file is not ours


class SavedStateError(ValueError):
    """The saved file is missing a part, corrupt, truncated or not this node's: never applied."""


def checksum(content: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(content)).hexdigest()


def _item_digest(item: dict[str, Any]) -> str:
    return digest({k: v for k, v in item.items() if k not in ("digest", "commit")})


class SavedState:
    """One node's saved desired state (the file and what it last held)."""

    def __init__(self, state_dir: Path, node: str) -> None:
        self.folder = Path(state_dir) / "desired"
        self.path = self.folder / f"{node}.json"
        self.node = node
        self._saved: str | None = None  # the checksum last written or read, to skip rewrites

    def save(self, desired: DesiredState, *, saved_at: float) -> bool:
        """Write ``desired`` if it is complete and differs from what the file holds; True when
        written. Atomic: a crash leaves the old file or the new one, never half of one."""
        if not desired.is_complete or desired.manifest is None:
            return False  # never a partial view: a later start would apply it as the truth
        m = desired.manifest
        content: dict[str, Any] = {
            "format": FORMAT,
            "node": self.node,
            "manifest": {"generation": m.generation, "commit": m.commit, "items": dict(m.items)},
            **{kind: dict(desired.kind(kind)) for kind in KINDS},
        }
        same = checksum(content)  # what it holds, without when: a rewrite only for a change
        if same == self._saved:
            return False
        stamped = content | {"saved_at": saved_at}
        data = canonical_json({"checksum": checksum(stamped), "content": stamped})
        private_dir(self.folder)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._saved = same
        return True

    def load(self) -> DesiredState | None:
        """The saved state, ``None`` when there is no file; :class:`SavedStateError` when the
        file fails a check (it is left in place for a person to look at)."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise SavedStateError(f"{self.path}: cannot read: {e}") from None
        desired, same = parse(raw, self.node, where=str(self.path))
        self._saved = same
        return desired


def parse(raw: bytes, node: str, *, where: str) -> tuple[DesiredState, str]:
    """Check a saved file's bytes: every check :meth:`SavedState.load` makes. Pure."""
    if len(raw) > MAX_BYTES:
        raise SavedStateError(f"{where}: larger than {MAX_BYTES} bytes")
    try:
        doc = load_json(raw)
    except ValueError as e:
        raise SavedStateError(f"{where}: not JSON (truncated or corrupt): {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("content"), dict):
        raise SavedStateError(f"{where}: no content object")
    content = doc["content"]
    if doc.get("checksum") != checksum(content):
        raise SavedStateError(f"{where}: checksum mismatch (the file was changed or damaged)")
    if content.get("format") != FORMAT:
        raise SavedStateError(f"{where}: format {content.get('format')!r}, this agent reads {FORMAT}")
    if content.get("node") != node:
        raise SavedStateError(f"{where}: saved for node {content.get('node')!r}, not {node!r}")
    try:
        check_payload("desired-manifest", content.get("manifest"))
    except PayloadError as e:
        raise SavedStateError(f"{where}: manifest: {e}") from None
    m = content["manifest"]
    manifest = Manifest(generation=int(m["generation"]), commit=str(m["commit"]), items=dict(m["items"]))
    kinds: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, schema in KINDS.items():
        items = content.get(kind)
        if not isinstance(items, dict):
            raise SavedStateError(f"{where}: no {kind} object")
        for item_id, item in items.items():
            try:
                check_payload(schema, item)
            except PayloadError as e:
                raise SavedStateError(f"{where}: {kind}/{item_id}: {e}") from None
            want = manifest.items.get(f"{kind}/{item_id}")
            if item.get("name") != item_id or want is None:
                raise SavedStateError(f"{where}: {kind}/{item_id} is not in the manifest")
            if item.get("digest") != want or _item_digest(item) != want:
                raise SavedStateError(f"{where}: {kind}/{item_id} does not match the manifest's digest")
        kinds[kind] = items
    desired = DesiredState(manifest=manifest, **kinds)
    if not desired.is_complete:
        raise SavedStateError(f"{where}: an item of the manifest is missing")
    return desired, checksum({k: v for k, v in content.items() if k != "saved_at"})
