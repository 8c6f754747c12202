"""Real age keys and real ``sops``-encrypted files for tests (keys made in the test, never fixed)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from phrame.sops import keys, tool


def need_sops() -> None:
    try:
        tool.binary()
    except tool.SopsError as e:
        pytest.skip(str(e))


def make_key(folder: Path, name: str) -> tuple[Path, str]:
    """A new age key file (0600) in ``folder`` and its recipient."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.agekey"
    return path, keys.generate(path)


def sops_encrypt(values: dict[str, object], recipients: list[str], target: Path) -> Path:
    """Write ``values`` encrypted by the real sops for ``recipients`` to ``target``."""
    need_sops()
    with tool.private_dir() as tmp:
        plain = tmp / "plain.yaml"
        plain.write_text(yaml.safe_dump(values))
        text = tool.encrypt(plain, recipients)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def sops_on_path() -> bool:
    return shutil.which("sops") is not None or (Path(sys.executable).parent / "sops").exists()


def item_secrets(sops_file: Path, *keys: str) -> dict[str, object]:
    """An item's ``secrets`` entry for one SOPS file, as the renderer writes it."""
    doc = yaml.safe_load(sops_file.read_text())
    values = {}
    for key in keys:
        node = doc
        for part in key.split("/"):
            node = node[part]
        values[key] = node
    stanzas = [{"recipient": s["recipient"], "enc": s["enc"]} for s in doc["sops"]["age"]]
    return {"age": stanzas, "values": values}
