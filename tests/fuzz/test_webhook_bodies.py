"""Fuzzing config-sync's webhook endpoint over real uvicorn (hypothesis, under the fuzz budget).

Bodies shaped like GitLab's push and merge-request events with hostile values (lone
surrogates, absurd iids, wrong types), raw bytes, and odd headers: never a 5xx, always a
JSON answer, and the service still answers ``/healthz`` afterwards.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.profile import fuzz
from tests.integration.test_sync_app import Running, running  # noqa: F401 (the fixture)
from tests.support.sync_support import SECRET

CHARS = st.characters() | st.characters(categories=["Cs"])  # lone surrogates too
NAME = st.sampled_from(["main", "feature/x", ""]) | st.text(CHARS, max_size=12)
HOSTILE_TEXT = st.one_of(
    st.sampled_from(["refs/heads/\ud800", "refs/heads/main", "\udfff", "refs/tags/v1", "-x"]),
    NAME.map(lambda n: "refs/heads/" + n),
    NAME,
)
VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([10**4000, -1, 0, 2**31, 2**63]),
    st.floats(allow_nan=False),
    HOSTILE_TEXT,
)
ANY_JSON = st.recursive(
    VALUE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


def _attrs() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "iid": VALUE,
            "target_branch": NAME,
            "source_branch": NAME,
            "action": st.sampled_from(["open", "update", "merge", "close"]) | HOSTILE_TEXT,
            "last_commit": ANY_JSON,
        },
    )


PUSH = st.fixed_dictionaries({"ref": HOSTILE_TEXT | VALUE}, optional={"after": VALUE, "checkout_sha": VALUE})
MERGE_REQUEST = st.fixed_dictionaries({}, optional={"object_attributes": _attrs() | ANY_JSON})
ASCII = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
EVENT = st.sampled_from(["Push Hook", "Merge Request Hook", "Tag Push Hook", "Note Hook", ""]) | ASCII
CASE = st.one_of(  # (event, body): mostly a body of the event's shape, so routing is reached
    st.tuples(st.just("Push Hook"), PUSH.map(lambda d: json.dumps(d).encode())),
    st.tuples(st.just("Merge Request Hook"), MERGE_REQUEST.map(lambda d: json.dumps(d).encode())),
    st.tuples(EVENT, ANY_JSON.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=200)),
)
CONTENT_TYPE = st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain"])


def test_hostile_webhooks_never_get_a_5xx(running: Running) -> None:  # noqa: F811 (the fixture)
    running.service.max_pending_reviews = 20
    answers: dict[int, int] = {}

    @settings(fuzz(0.75), deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=CASE, key=ASCII, content_type=CONTENT_TYPE)
    def check(case: tuple[str, bytes], key: str, content_type: str) -> None:
        event, body = case
        # httpx refuses header values with surrounding white space; servers never see them
        headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": event.strip(), "Content-Type": content_type}
        if key.strip():
            headers["Idempotency-Key"] = key.strip()
        answer = running.http.post("/webhooks/gitlab", content=body, headers=headers)
        assert answer.status_code < 500, (body, event, answer.text)
        assert isinstance(answer.json(), dict)
        answers[answer.status_code] = answers.get(answer.status_code, 0) + 1

    check()
    assert len(answers) >= 3, answers  # the fuzz reached more than one branch
    assert running.http.get("/healthz").status_code == 200
    running.idle()
