"""Which refs placement reads and writes, against a real bare git remote: an environment not
yet on the branch it tracks is not placed (no orphan node.json there), and PHRAME_TRACK_REF is
the default branch, as for config-sync. Liveness is fed directly with a fake clock."""

from __future__ import annotations

import json
from pathlib import Path

from placement.loop import build_loop
from placement.settings import PlacementSettings
from tests.integration.test_placement_git import (
    FIXTURE,
    Clock,
    ConfigRemote,
    assert_deployable,
    beat,
    make,
)

PROD_ENV = "name: prod\ntrack: prod\nplacement: auto\n"
WEB = "name: web\nimage: web:1\nresources: {cpus: 1, memory: 1Gi}\nplacement:\n  labels: {role: edge}\n"


def test_environment_not_yet_on_its_tracked_branch_gets_no_node_json_there(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    remote.git("push", "-q", "origin", "main:prod")  # prod cut from main
    remote.change("environments/prod/environment.yaml", PROD_ENV, "add the prod environment")
    remote.change("environments/prod/services/web.yaml", WEB, "add web to prod")
    prod = remote.head("prod")
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    results = {r.environment: r for r in rec.run_pass()}
    assert results["prod"].error is not None
    assert results["prod"].error.startswith("environment prod is not on branch prod yet")
    assert "environments/prod/environment.yaml" in results["prod"].error
    assert results["prod"].commit is None and results["prod"].decision is None
    assert remote.head("prod") == prod  # nothing written onto prod
    assert results["studio-a"].error is None and results["studio-a"].commit == remote.head()

    # merged into prod: now it is placed there, and prod is deployable
    remote.git("fetch", "-q", "origin")
    remote.git("push", "-q", "origin", "origin/main:refs/heads/prod")
    merged = remote.head("prod")
    clock.now += 5
    beat(rec.liveness, clock)
    placed = {r.environment: r for r in rec.run_pass()}["prod"]
    assert placed.error is None and placed.commit == remote.head("prod")
    assert remote.head("prod~1") == merged
    web = json.loads(remote.show("environments/prod/node.json", "prod"))["assignments"]["web"]
    assert len(web) == 1 and web[0] in ("edge-01", "edge-02", "edge-03")
    assert_deployable(remote, "prod")


def test_phrame_track_ref_is_the_default_branch(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    text = (FIXTURE / "environments/studio-a/environment.yaml").read_text()
    assert "track: main\n" in text
    remote.change("environments/studio-a/environment.yaml", text.replace("track: main\n", ""), "no track:")
    remote.git("push", "-q", "origin", "main:production")
    main = remote.head()
    env = {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_TRACK_REF": "production",
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
    }
    clock = Clock()
    loop = build_loop(PlacementSettings.from_env(env), clock=clock)
    try:
        beat(loop.liveness, clock)
        (result,) = loop.reconciler.run_pass()
    finally:
        loop.close()
    assert result.error is None and result.track == "production"
    assert result.commit is not None and result.commit == remote.head("production")
    assert remote.head() == main  # main is not the default branch here: untouched
    assert remote.node_json("production")["assignments"]["mixer"] == ["edge-02", "edge-03"]
    assert_deployable(remote, "production")
