"""The importer's ``dangerous`` list: every kept setting that gives a service power over its
host, shown by ``phrame import-compose``, the API's answer and the merge request."""

from __future__ import annotations

from pathlib import Path

import pytest

from phrame.cli import main
from phrame.compose import import_compose
from tests.support.compose_repo import new_repo
from topic_api.imports.proposal import Draft, Proposal

# the security review's compose file: root's worth of mounts and a Docker API port
HOSTILE = """\
services:
  app:
    image: busybox
    user: "0"
    privileged: true
    volumes:
      - /:/host
      - /var/run/docker.sock:/var/run/docker.sock
      - /etc/shadow:/shadow:ro
      - /srv/app/../data:/data
      - cache:/cache
    ports: ["2375:2375", "127.0.0.1:8080:80", "0.0.0.0:9000:9000", "6379"]
volumes:
  cache: {}
"""


def test_every_dangerous_setting_kept_is_listed_with_its_key() -> None:
    result = import_compose(HOSTILE, env="lab")
    found = {d.key: d.reason for d in result.dangerous}
    assert {d.service for d in result.dangerous} == {"app"}
    assert sorted(found) == [
        "ports[0]",
        "ports[2]",
        "ports[3]",
        "user",
        "volumes[0]",
        "volumes[1]",
        "volumes[2]",
        "volumes[3]",
    ]
    assert "the whole host's file system" in found["volumes[0]"]
    assert "the Docker socket" in found["volumes[1]"]
    assert "the host's /etc, a protected path" in found["volumes[2]"]
    assert "host path /srv/data: it runs only on nodes whose policy allows it" in found["volumes[3]"]
    assert "'2375:2375' is published on every interface" in found["ports[0]"]
    assert "runs as root" in found["user"]
    # what the import drops is no danger kept: it stays in the unsupported list
    assert [u.key for u in result.unsupported] == ["privileged"]


def test_a_plain_service_has_nothing_dangerous() -> None:
    text = "services:\n  web:\n    image: nginx\n    ports: ['127.0.0.1:8080:80']\n    volumes: ['data:/d']\nvolumes:\n  data: {}\n"
    assert import_compose(text, env="lab").dangerous == []


def test_import_compose_prints_the_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "compose.yml").write_text(HOSTILE)
    repo = new_repo(tmp_path / "repo", "n1")
    main(
        ["import-compose", str(tmp_path / "compose.yml"), "--env", "lab", "--node", "n1", "--repo", str(repo)]
    )
    out = capsys.readouterr().out
    assert "dangerous, kept (8):\n  app: volumes[0]: bind-mounts /, which reaches the whole host's" in out


def test_the_api_answer_and_the_merge_request_carry_the_list() -> None:
    d = Draft("lab", None, import_compose(HOSTILE, env="lab"))
    doc = Proposal(d, dict(d.result.files)).to_json(dry_run=True)
    assert len(doc["dangerous"]) == 8
    assert doc["dangerous"][0]["service"] == "app" and doc["dangerous"][0]["key"] == "volumes[0]"
    text = d.description(sorted(d.result.files), "checked")
    assert (
        "**Kept, with power over the host" in text
        and "- app: volumes[1]: bind-mounts /var/run/docker.sock" in text
    )
    assert "Kept, with power over the host:\n  app: volumes[0]" in d.commit_message(list(d.result.files))
