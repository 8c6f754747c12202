"""The plan digest reviewed on each merge request, kept retained at ``<prefix>/desired/reviews``.

``Syncer.review`` calls :meth:`ReviewedPlans.remember` after it wrote the plan note; the merge
check reads :meth:`ReviewedPlans.get`. The broker is the store (schema ``desired-reviews``):
config-sync reads it back at start (:meth:`restore`, from the desired plane it rebuilt), so a
restart between the review and the merge still knows what was reviewed. Newest first, at most
:data:`KEPT` merge requests. A failed publication is logged: the next review sends it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from phrame.mqtt import MqttError
from schemas import PayloadError, canonical_json, check_payload, load_json

log = logging.getLogger(__name__)
KEPT = 200


@dataclass(frozen=True)
class Reviewed:
    mr: int
    digest: str
    commit: str
    target: str
    reviewed_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "mr": self.mr,
            "digest": self.digest,
            "commit": self.commit,
            "target": self.target,
            "reviewed_at": round(self.reviewed_at, 3),
        }


class ReviewedPlans:
    def __init__(
        self,
        topic: str,
        publish: Callable[[str, bytes], None],
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``publish(topic, payload)``: a retained publication on the desired broker."""
        self.topic, self.publish, self.wall = topic, publish, wall
        self._by_mr: dict[int, Reviewed] = {}
        self._lock = threading.Lock()

    def restore(self, published: Mapping[str, bytes]) -> None:
        raw = published.get(self.topic)
        if not raw:
            return
        try:
            doc = load_json(raw)
            check_payload("desired-reviews", doc)
        except (ValueError, PayloadError) as e:
            log.warning("ignoring the retained %s (%s): reviews start again", self.topic, e)
            return
        with self._lock:
            for r in reversed(doc["reviews"]):  # oldest first: the newest wins
                self._by_mr[int(r["mr"])] = Reviewed(
                    int(r["mr"]), r["digest"], r["commit"], r["target"], float(r["reviewed_at"])
                )
        log.info("read back the reviewed plans of %d merge request(s)", len(self._by_mr))

    def get(self, mr: int) -> Reviewed | None:
        with self._lock:
            return self._by_mr.get(mr)

    def remember(self, mr: int, digest: str, commit: str, target: str) -> None:
        with self._lock:
            self._by_mr.pop(mr, None)
            self._by_mr[mr] = Reviewed(mr, digest, commit, target, self.wall())
            while len(self._by_mr) > KEPT:
                del self._by_mr[next(iter(self._by_mr))]
            newest_first = [r.to_dict() for r in reversed(self._by_mr.values())]
        payload = canonical_json({"reviews": newest_first})
        try:
            self.publish(self.topic, payload)
        except MqttError as e:
            log.warning("could not publish the reviewed plan of !%d: %s", mr, e)
