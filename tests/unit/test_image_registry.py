"""The registry client against canned answers shaped as the Docker Registry HTTP API v2 and
its token service document them: the bearer challenge answered with a token (with the
credentials), tag pages followed by ``Link``, the manifest Accept header, an image index
resolved to the platform's manifest for ``created``; errors say which registry."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import responses

from image_watch.registry import ACCEPT, Credentials, RegistryClient, RegistryError

BASE = "https://reg.example.test"
CHALLENGE = 'Bearer realm="https://auth.example.test/token",service="reg.example.test",scope="repository:lab/web:pull"'
INDEX_DIGEST = "sha256:" + "1" * 64
AMD64 = "sha256:" + "2" * 64
ARM64 = "sha256:" + "3" * 64
CONFIG = "sha256:" + "4" * 64


@responses.activate
def test_a_bearer_challenge_is_answered_and_tag_pages_followed() -> None:
    tags = f"{BASE}/v2/lab/web/tags/list"
    responses.get(tags, status=401, headers={"WWW-Authenticate": CHALLENGE})
    responses.get(
        tags, json={"name": "lab/web", "tags": ["1.0.0", "1.1.0"]},
        headers={"Link": '</v2/lab/web/tags/list?last=1.1.0&n=1000>; rel="next"'},
    )  # fmt: skip
    responses.get(tags, json={"name": "lab/web", "tags": ["1.2.0"]})
    token = responses.get("https://auth.example.test/token", json={"token": "tok-123", "expires_in": 300})

    client = RegistryClient("reg.example.test", credentials=Credentials("bot", "pw"))
    assert client.tags("lab/web") == ["1.0.0", "1.1.0", "1.2.0"]

    asked = token.calls[0].request
    assert "service=reg.example.test" in asked.url and "scope=repository%3Alab%2Fweb%3Apull" in asked.url
    assert asked.headers["Authorization"].startswith("Basic ")
    assert responses.calls[2].request.headers["Authorization"] == "Bearer tok-123"
    assert "last=1.1.0" in responses.calls[3].request.url


@responses.activate
def test_an_index_pins_its_own_digest_and_reads_the_platforms_created() -> None:
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ARM64, "size": 1,
             "platform": {"architecture": "arm64", "os": "linux"}},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": AMD64, "size": 1,
             "platform": {"architecture": "amd64", "os": "linux"}},
        ],
    }  # fmt: skip
    manifest = {"schemaVersion": 2, "config": {"digest": CONFIG, "size": 1}, "layers": []}
    head = responses.get(
        f"{BASE}/v2/lab/web/manifests/1.2.0", body=json.dumps(index),
        headers={"Docker-Content-Digest": INDEX_DIGEST, "Content-Type": index["mediaType"]},
    )  # fmt: skip
    responses.get(
        f"{BASE}/v2/lab/web/manifests/{AMD64}", json=manifest, headers={"Docker-Content-Digest": AMD64}
    )
    responses.get(f"{BASE}/v2/lab/web/blobs/{CONFIG}", json={"created": "2026-12-01T09:00:00.123456789Z"})

    info = RegistryClient("reg.example.test").inspect("lab/web", "1.2.0")
    assert info.digest == INDEX_DIGEST
    assert info.created == datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC)
    assert head.calls[0].request.headers["Accept"] == ACCEPT
    assert "application/vnd.docker.distribution.manifest.list.v2+json" in ACCEPT


@responses.activate
def test_a_refusal_names_the_registry() -> None:
    responses.get(f"{BASE}/v2/lab/web/tags/list", status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
    with pytest.raises(RegistryError, match=r"reg\.example\.test: GET /v2/lab/web/tags/list.* answered 401"):
        RegistryClient("reg.example.test").tags("lab/web")
