"""Review mode against a real bare remote and a canned GitLab (``responses``): opening the
merge request of a new placement branch closes that environment's older placement merge
requests, and only those."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import responses

from phrame.gitlab import GitLabProject
from tests.integration.test_placement_git import FIXTURE, Clock, ConfigRemote, beat, make

GITLAB = "https://gitlab.example.test"
MRS = f"{GITLAB}/api/v4/projects/42/merge_requests"
JSON = {"Content-Type": "application/json"}


class OpenMergeRequests:
    """GitLab's open merge requests of one project, kept in memory."""

    def __init__(self, api: responses.RequestsMock, *branches: str) -> None:
        self.open: dict[int, dict[str, Any]] = {}
        self.closed: list[int] = []
        self.refusing = False  # True: creating one answers 403, as for a token without api scope
        for branch in branches:
            self.add(branch)
        api.add_callback(responses.GET, MRS, self.listing)
        api.add_callback(responses.POST, MRS, self.create)
        api.add_callback(responses.PUT, re.compile(rf"{re.escape(MRS)}/\d+"), self.update)

    def add(self, branch: str) -> dict[str, Any]:
        iid = len(self.open) + len(self.closed) + 1
        doc = {"iid": iid, "source_branch": branch, "state": "opened", "web_url": f"{GITLAB}/mr/{iid}"}
        self.open[iid] = doc
        return doc

    def listing(self, request: Any) -> tuple[int, dict[str, str], str]:
        wanted = request.params.get("source_branch")
        found = [m for m in self.open.values() if wanted in (None, m["source_branch"])]
        return 200, JSON, json.dumps(found)

    def create(self, request: Any) -> tuple[int, dict[str, str], str]:
        if self.refusing:
            return 403, JSON, json.dumps({"message": "403 Forbidden"})
        return 201, JSON, json.dumps(self.add(json.loads(request.body)["source_branch"]))

    def update(self, request: Any) -> tuple[int, dict[str, str], str]:
        iid = int(request.url.rsplit("/", 1)[-1])
        assert json.loads(request.body) == {"state_event": "close"}
        doc = {**self.open.pop(iid), "state": "closed"}
        self.closed.append(iid)
        return 200, JSON, json.dumps(doc)


def test_a_new_placement_merge_request_closes_the_older_ones_of_its_environment(
    tmp_path: Path,
) -> None:
    remote = ConfigRemote(tmp_path)
    env = (FIXTURE / "environments/studio-a/environment.yaml").read_text()
    base = remote.change(
        "environments/studio-a/environment.yaml",
        env.replace("placement: auto", "placement: review"),
        "review placements",
    )
    branch = f"placement/studio-a/{base[:8]}"
    stale = ("placement/studio-a/0badc0de", "placement/studio-a/feedface")
    keep = ("placement/studio-b/0badc0de", "feature/placement-docs")
    clock = Clock()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        gitlab = OpenMergeRequests(api, *stale, *keep)
        rec = make(tmp_path, remote, clock, merge_requests=GitLabProject(GITLAB, "t", "42").merge_requests)
        first = rec.run_pass()[0]
        assert first.error is None and first.branch == branch
        assert sorted(m["source_branch"] for m in gitlab.open.values()) == sorted([branch, *keep])
        assert gitlab.closed == [1, 2]
        # a rerun finds its own merge request open: nothing is opened or closed
        clock.now += 5
        beat(rec.liveness, clock)
        calls = len(api.calls)
        again = rec.run_pass()[0]
        methods = [c.request.method for c in api.calls[calls:]]
    assert again.error is None and again.merge_request == first.merge_request
    assert gitlab.closed == [1, 2] and len(gitlab.open) == 3
    assert methods == ["GET"]


def test_gitlab_refusing_the_merge_request_is_a_reported_failure_not_a_crash(tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    env = (FIXTURE / "environments/studio-a/environment.yaml").read_text()
    base = remote.change(
        "environments/studio-a/environment.yaml",
        env.replace("placement: auto", "placement: review"),
        "review placements",
    )
    clock = Clock()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        gitlab = OpenMergeRequests(api)
        gitlab.refusing = True
        rec = make(tmp_path, remote, clock, merge_requests=GitLabProject(GITLAB, "t", "42").merge_requests)
        refused = rec.run_pass()[0]
        # an expected failure (the adapter's own error), said as GitLab said it; the branch is pushed
        assert refused.error is not None and not refused.error.startswith("unexpected")
        assert "cannot open a merge request" in refused.error and "403" in refused.error
        branch = f"placement/studio-a/{base[:8]}"
        pushed = remote.head(branch)
        # GitLab lets it through again: the next pass opens the merge request of the same branch
        gitlab.refusing = False
        clock.now += 5
        beat(rec.liveness, clock)
        again = rec.run_pass()[0]
    assert again.error is None and again.branch == branch and again.merge_request == f"{GITLAB}/mr/1"
    assert again.commit is None and remote.head(branch) == pushed  # nothing to push again
