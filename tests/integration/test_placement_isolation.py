"""One environment's unexpected failure never stops the placement pass for the others.

Two review-mode environments on a real bare remote; GitLab (canned with ``responses``)
answers one environment's merge request lookup with a body python-gitlab cannot use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import responses

from phrame.gitlab import GitLabProject
from tests.integration.test_placement_git import FIXTURE, Clock, ConfigRemote, make

GITLAB = "https://gitlab.example.test"
MRS = f"{GITLAB}/api/v4/projects/42/merge_requests"
JSON = {"Content-Type": "application/json"}


def add_review_environment(remote: ConfigRemote, name: str) -> None:
    """``name``: the sample environment's mixer (label-placed) alone, in review mode."""
    folder = remote.work / "environments" / name
    (folder / "services").mkdir(parents=True)
    shutil.copytree(FIXTURE / "environments/studio-a/networks", folder / "networks")
    env = (FIXTURE / "environments/studio-a/environment.yaml").read_text()
    env = env.replace("name: studio-a", f"name: {name}").replace("placement: auto", "placement: review")
    (folder / "environment.yaml").write_text(env)
    mixer = (FIXTURE / "environments/studio-a/services/mixer.yaml").read_text()
    (folder / "services" / "mixer.yaml").write_text(
        mixer.replace("9100:9100", "9200:9100").replace("cpus: 3", "cpus: 1")
    )


def test_one_environment_failing_unexpectedly_leaves_the_others_placed(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    for name in ("studio-b", "studio-c"):
        add_review_environment(remote, name)
    remote.change("README.md", "two review environments\n", "add studio-b and studio-c")
    web_url = f"{GITLAB}/g/p/-/merge_requests/8"

    def listing(request: Any) -> tuple[int, dict[str, str], str]:
        branch = parse_qs(urlsplit(request.url).query).get("source_branch", [""])[0]
        # studio-b: not an API error python-gitlab knows, an object without the iid every MR has
        found = [{"source_branch": branch}] if branch.startswith("placement/studio-b/") else []
        return 200, JSON, json.dumps(found)

    def create(request: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(request.body)
        return 201, JSON, json.dumps({"iid": 8, "source_branch": body["source_branch"], "web_url": web_url})

    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        api.add_callback(responses.GET, MRS, listing)
        api.add_callback(responses.POST, MRS, create)
        rec = make(tmp_path, remote, Clock(), merge_requests=GitLabProject(GITLAB, "t", "42").merge_requests)
        results = {r.environment: r for r in rec.run_pass()}
        posted = [
            json.loads(c.request.body or "{}")["source_branch"]
            for c in api.calls
            if c.request.method == "POST"
        ]
    assert sorted(results) == ["studio-a", "studio-b", "studio-c"]
    assert results["studio-b"].error is not None and "AttributeError" in results["studio-b"].error
    assert results["studio-a"].error is None and results["studio-a"].commit == remote.head("main")
    fine = results["studio-c"]
    assert fine.error is None and fine.merge_request == web_url and fine.branch is not None
    assert posted == [fine.branch] and remote.head(fine.branch) == fine.commit
