"""Reading an image registry with the Docker Registry HTTP API v2: tags, the digest of a
tag's manifest and the ``created`` time of its image config. The one HTTP adapter of the
image watcher (``requests``); it never pushes, deletes or pulls a layer.

Auth: Basic with the registry's credentials, or the bearer-token challenge (``401`` with
``WWW-Authenticate: Bearer realm=...,service=...,scope=...``: a token fetched from the realm,
with the credentials when there are any, and kept per repository). Every failure is a
``RegistryError`` saying what and which registry.
"""

from __future__ import annotations

import base64
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import requests

log = logging.getLogger(__name__)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
INDEXES = (OCI_INDEX, DOCKER_LIST)
MAX_TAG_PAGES = 50  # 50 pages of 1,000 tags
CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """The registry did not answer, refused, or answered something unreadable."""


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class TagInfo:
    tag: str
    digest: str  # of the manifest the tag names (an index for a multi-platform image): what is pinned
    created: datetime | None  # the image config's ``created`` (the platform's, for an index)


class RegistryClient:
    def __init__(
        self,
        host: str,
        *,
        credentials: Credentials | None = None,
        plain_http: bool = False,
        timeout_s: float = 30.0,
        platform: tuple[str, str] = ("linux", "amd64"),
    ) -> None:
        self.host = host
        self.base = f"{'http' if plain_http else 'https'}://{host}"
        self.credentials = credentials
        self.timeout_s = timeout_s
        self.platform = platform
        self.session = requests.Session()
        self._tokens: dict[str, str] = {}  # repository -> bearer token

    # -- the three reads
    def tags(self, repository: str) -> list[str]:
        """Every tag of ``repository`` (``GET /v2/<name>/tags/list``, following ``Link`` pages)."""
        url: str | None = f"{self.base}/v2/{repository}/tags/list?n=1000"
        found: list[str] = []
        for _ in range(MAX_TAG_PAGES):
            if url is None:
                break
            r = self._get(repository, url, {})
            found += [t for t in (self._json(r, url).get("tags") or []) if isinstance(t, str)]
            nxt = r.links.get("next", {}).get("url")
            url = requests.compat.urljoin(self.base, nxt) if nxt else None
        return found

    def inspect(self, repository: str, tag: str) -> TagInfo:
        """The tag's manifest digest and its image config's ``created``."""
        url = f"{self.base}/v2/{repository}/manifests/{tag}"
        r = self._get(repository, url, {"Accept": ACCEPT})
        digest = r.headers.get("Docker-Content-Digest")
        if not digest:
            raise RegistryError(
                f"{self.host}/{repository}:{tag}: the manifest answer has no Docker-Content-Digest"
            )
        manifest = self._json(r, url)
        kind = str(manifest.get("mediaType") or r.headers.get("Content-Type", "")).split(";")[0]
        if kind in INDEXES or "manifests" in manifest:
            manifest = self._platform_manifest(repository, tag, manifest)
        config = manifest.get("config") or {}
        created = self._created(repository, str(config.get("digest", ""))) if config.get("digest") else None
        return TagInfo(tag, digest, created)

    def _platform_manifest(self, repository: str, tag: str, index: dict[str, Any]) -> dict[str, Any]:
        os_, arch = self.platform
        entries = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
        chosen = next(
            (m for m in entries if (m.get("platform") or {}).get("os") == os_
             and (m.get("platform") or {}).get("architecture") == arch),
            entries[0] if entries else None,
        )  # fmt: skip
        if chosen is None:
            raise RegistryError(f"{self.host}/{repository}:{tag}: an index with no manifest")
        url = f"{self.base}/v2/{repository}/manifests/{chosen['digest']}"
        return self._json(self._get(repository, url, {"Accept": ACCEPT}), url)

    def _created(self, repository: str, digest: str) -> datetime | None:
        url = f"{self.base}/v2/{repository}/blobs/{digest}"
        text = self._json(self._get(repository, url, {}), url).get("created")
        if not isinstance(text, str):
            return None
        try:  # Go writes nanoseconds; fromisoformat takes at most microseconds
            text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
            return datetime.fromisoformat(text)
        except ValueError:
            return None

    # -- HTTP and auth
    def _get(self, repository: str, url: str, headers: dict[str, str]) -> requests.Response:
        r = self._send(url, headers, self._auth(repository))
        if r.status_code == 401:
            challenge = r.headers.get("WWW-Authenticate", "")
            if challenge.lower().startswith("bearer "):
                self._tokens[repository] = self._token(challenge)
                r = self._send(url, headers, self._auth(repository))
        if r.status_code != 200:
            raise RegistryError(
                f"{self.host}: GET {url.removeprefix(self.base)} answered {r.status_code}: {r.text[:200]}"
            )
        return r

    def _send(self, url: str, headers: dict[str, str], auth: dict[str, str]) -> requests.Response:
        try:
            return self.session.get(
                url, headers={**headers, **auth}, timeout=self.timeout_s, allow_redirects=True
            )
        except requests.RequestException as e:
            raise RegistryError(f"{self.host}: cannot reach the registry: {e}") from e

    def _auth(self, repository: str) -> dict[str, str]:
        if repository in self._tokens:
            return {"Authorization": f"Bearer {self._tokens[repository]}"}
        if self.credentials is not None:
            pair = f"{self.credentials.username}:{self.credentials.password}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        return {}

    def _token(self, challenge: str) -> str:
        params = dict(CHALLENGE.findall(challenge))
        realm = params.pop("realm", None)
        if not realm:
            raise RegistryError(f"{self.host}: a bearer challenge without a realm: {challenge[:200]}")
        auth = (self.credentials.username, self.credentials.password) if self.credentials else None
        try:
            r = self.session.get(realm, params=params, auth=auth, timeout=self.timeout_s)
        except requests.RequestException as e:
            raise RegistryError(f"{self.host}: cannot reach the token service {realm}: {e}") from e
        if r.status_code != 200:
            raise RegistryError(f"{self.host}: the token service {realm} answered {r.status_code}")
        doc = self._json(r, realm)
        token = doc.get("token") or doc.get("access_token")
        if not isinstance(token, str):
            raise RegistryError(f"{self.host}: the token service {realm} gave no token")
        return token

    def _json(self, r: requests.Response, url: str) -> dict[str, Any]:
        try:
            doc = r.json()
        except ValueError as e:
            raise RegistryError(f"{self.host}: {url.removeprefix(self.base)} is not JSON") from e
        if not isinstance(doc, dict):
            raise RegistryError(f"{self.host}: {url.removeprefix(self.base)} is not a JSON object")
        return doc
