"""Push a tiny image straight to a registry through the Docker Registry HTTP API v2 (blob
uploads, then a manifest): no dockerd, and the image config's ``created`` is whatever the
test asks for (``min_age`` reads it). Optionally wrapped in an OCI image index, as a
multi-platform image is."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from datetime import datetime

import requests

from tests.support.registry import Registry

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _upload(registry: Registry, repo: str, data: bytes) -> str:
    auth = (registry.username, registry.password)
    r = requests.post(f"http://{registry.url}/v2/{repo}/blobs/uploads/", auth=auth, timeout=10)
    assert r.status_code == 202, r.text
    location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry.url}{location}"
    digest = _digest(data)
    sep = "&" if "?" in location else "?"
    r = requests.put(f"{location}{sep}digest={digest}", data=data, auth=auth, timeout=10,
                     headers={"Content-Type": "application/octet-stream"})  # fmt: skip
    assert r.status_code == 201, r.text
    return digest


def _put_manifest(registry: Registry, repo: str, ref: str, body: bytes, media_type: str) -> str:
    r = requests.put(
        f"http://{registry.url}/v2/{repo}/manifests/{ref}",
        data=body,
        auth=(registry.username, registry.password),
        headers={"Content-Type": media_type},
        timeout=10,
    )
    assert r.status_code == 201, r.text
    return str(r.headers["Docker-Content-Digest"])


def push_image(registry: Registry, repo: str, tag: str, *, created: datetime, index: bool = False) -> str:
    """Push ``repo:tag`` whose config says ``created``; returns the digest the tag names
    (the index's when ``index``)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        content = f"{repo}:{tag}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "created": created.isoformat().replace("+00:00", "Z"),
        "config": {"Cmd": ["/hello"]},
        "rootfs": {"type": "layers", "diff_ids": [_digest(raw.getvalue())]},
    }).encode()  # fmt: skip
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": len(config), "digest": _upload(registry, repo, config)},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": len(layer), "digest": _upload(registry, repo, layer)}],
    }).encode()  # fmt: skip
    if not index:
        return _put_manifest(registry, repo, tag, manifest, DOCKER_MANIFEST)
    inner = _put_manifest(registry, repo, _digest(manifest), manifest, DOCKER_MANIFEST)
    body = json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": DOCKER_MANIFEST, "size": len(manifest), "digest": inner,
             "platform": {"architecture": "amd64", "os": "linux"}},
        ],
    }).encode()  # fmt: skip
    return _put_manifest(registry, repo, tag, body, OCI_INDEX)
