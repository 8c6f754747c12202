"""The approvals of each environment, retained at ``<prefix>/desired/environments/<env>/approvals``.

The approve route (``POST /environments/{env}/approvals``) and GitLab's merge-request
approvals add to it; the gate of each publication reads it. The broker is the store:
config-sync reads the retained lists back at start (:meth:`ApprovalStore.restore`, before
its first publication), so an approval survives a restart, and sends them all again after
a reconnect. Publishing is queued on the connection (``publish``): a request never waits
on the broker. Keeps the newest :data:`KEPT` approvals per environment.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from config_sync.approvals.protection import Approval
from config_sync.retained import env_payloads
from schemas import Topics, canonical_json

log = logging.getLogger(__name__)
KEPT = 50  # per environment, as the topic's contract says


class ApprovalStore:
    def __init__(
        self,
        topics: Topics,
        publish: Callable[[str, bytes], None],
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.topics, self.publish, self.wall = topics, publish, wall
        self.by_env: dict[str, list[Approval]] = {}
        self._lock = threading.Lock()

    def restore(self, published: Mapping[str, bytes]) -> None:
        """Take the retained lists back (``published``: the desired plane as the broker holds it)."""
        with self._lock:
            for env, doc in env_payloads(published, self.topics, "approvals", "desired-approvals"):
                self.by_env[env] = [Approval.from_doc(a) for a in doc["approvals"]]
        log.info("read back the approvals of %d environment(s)", len(self.by_env))

    def of(self, env: str) -> tuple[Approval, ...]:
        with self._lock:
            return tuple(self.by_env.get(env, ()))

    def add(self, env: str, approval: Approval) -> bool:
        """Record ``approval`` (False: that holder approved that commit already, with the
        same ``override_freeze``: nothing new, nothing published)."""
        with self._lock:
            kept = self.by_env.setdefault(env, [])
            for a in kept:
                same = (a.commit, a.by) == (approval.commit, approval.by)
                if same and (a.override_freeze or not approval.override_freeze):
                    return False
            kept.append(approval)
            del kept[:-KEPT]
            body = self._payload(env)
        self.publish(self.topics.env_approvals(env), body)
        return True

    def republish(self) -> None:
        """After a reconnect (the broker may have lost its retained topics): send every list."""
        with self._lock:
            bodies = {env: self._payload(env) for env in self.by_env}
        for env, body in sorted(bodies.items()):
            self.publish(self.topics.env_approvals(env), body)

    def _payload(self, env: str) -> bytes:
        doc = {"environment": env, "approvals": [a.to_doc() for a in self.by_env[env]], "ts": self.wall()}
        return canonical_json(doc)
