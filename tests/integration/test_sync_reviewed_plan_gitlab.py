"""The reviewed plan stays the plan, with GitLab (python-gitlab against canned answers): the
plan note carries the digest; when a push to the target lands between the review and the
merge and changes the same service, the merge's ``phrame/deploy`` status on GitLab says
``plan changed since review`` and the one plan note is edited with the warning. The merge
hook's ``merge_commit_sha`` is not in the repository here: the target's head is judged."""

from __future__ import annotations

import pytest

from tests.integration.test_sync_app import Running
from tests.integration.test_sync_gitlab_flow import CannedGitLab, gitlab_running
from tests.support.services import eventually
from tests.support.sync_support import SAMPLE

__all__ = ["gitlab_running"]
EGRESS = "environments/studio-a/services/egress.yaml"
TEXT = (SAMPLE / EGRESS).read_text()


@pytest.mark.slow
def test_a_merge_after_an_interfering_push_is_flagged_on_gitlab(
    gitlab_running: tuple[Running, CannedGitLab],
) -> None:
    running, gitlab = gitlab_running
    work = running.remote.work
    work.git.checkout("-B", "feature/x", "origin/main")
    running.remote.commit(
        "egress: grace 40s",
        branch="feature/x",
        files={EGRESS: TEXT.replace("stop_grace_period: 30s", "stop_grace_period: 40s")},
    )
    assert running.post("merge-request-open.json").status_code == 202
    running.idle()
    (note,) = gitlab.notes
    reviewed = note["body"].split("Plan digest: `")[1].split("`")[0]
    # meanwhile main changes the same service
    work.git.checkout("-B", "main", "origin/main")
    running.remote.commit("egress: logs 80m", files={EGRESS: TEXT.replace("max-size: 50m", "max-size: 80m")})
    assert running.post("push.json").status_code == 202
    running.idle()
    work.git.merge("--no-ff", "origin/feature/x", "-m", "Merge branch 'feature/x'")
    work.git.push("origin", "HEAD:refs/heads/main")
    merged = str(work.head.commit.hexsha)
    assert running.post("merge-request-merge.json").status_code == 202
    running.idle()

    def flagged() -> bool:
        return any(
            s["sha"] == merged and s["name"] == "phrame/deploy"
            and s["description"].startswith("plan changed since review")
            for s in gitlab.statuses
        )  # fmt: skip

    assert eventually(flagged, 15)
    assert len(gitlab.notes) == 1 and gitlab.writes == ["create", "edit"]  # the one note, edited
    body = gitlab.notes[0]["body"]
    assert "**Plan changed since review**" in body and reviewed in body and f"`{merged[:12]}`" in body
