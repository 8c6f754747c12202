"""The topic API's environment view carries each service's staged rollout."""

from __future__ import annotations

from topic_api.environments import environment_view
from topic_api.planes import EnvTopics, index_plane


def test_rollouts_are_indexed_by_service_and_shown_in_the_environment() -> None:
    doc = {"service": "web", "state": "progressing", "wave": 2, "waves": 4, "done": 1, "total": 4}
    topics = {
        "phrame/desired/environments/prod/rollouts/web": doc,
        "phrame/desired/environments/prod/rollouts/odd": "not an object",
        "phrame/desired/environments/prod/sync": {"ok": True, "commit": "a" * 40},
    }
    index = index_plane(topics, "phrame", "desired")
    assert set(index.environments["prod"].rollouts) == {"web", "odd"}
    view = environment_view("prod", index.environments["prod"])
    assert view["rollouts"] == {"web": doc}  # a malformed payload is left out, never an error
    assert "rollouts" not in environment_view("x", EnvTopics())  # none: the field is absent
