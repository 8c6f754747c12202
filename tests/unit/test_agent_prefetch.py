"""The agent's pulls ahead of a wave: what it asks for, its report, the bound on pulls at a
time shared with a pass's pulls, and the ``prefetch/<env>`` topics in the desired store."""

from __future__ import annotations

import json
import threading

from node_agent.desired import DesiredStore
from node_agent.prefetch import Prefetcher, PullSlots
from node_agent.settings import AgentSettings
from schemas import Topics
from tests.support.waiting import wait_for

T = Topics()


class Gate:
    """``ensure_image`` that blocks until released; counts pulls under way and the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.now = self.most = 0
        self.fail: set[str] = set()

    def __call__(self, image: str) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            self.release.wait(10)
            if image in self.fail:
                raise RuntimeError(f"pull {image}: manifest unknown")
        finally:
            with self.lock:
                self.now -= 1


def test_pulls_are_bounded_reported_and_forgotten_when_no_longer_asked_for() -> None:
    gate, woken = Gate(), threading.Event()
    gate.fail.add("c:1")
    slots = PullSlots(2)
    pre = Prefetcher(gate, slots, on_change=woken.set)
    try:
        pre.want(["a:1", "b:1", "c:1"])
        wait_for(lambda: gate.now == 2, "two pulls under way")
        assert gate.most == 2  # the third waits for a slot
        assert pre.report() == {i: {"state": "pulling"} for i in ("a:1", "b:1", "c:1")}
        # a pass's own pull takes a slot of the same bound
        assert not slots._slots.acquire(blocking=False)
        gate.release.set()
        wait_for(lambda: all(r["state"] != "pulling" for r in pre.report().values()), "pulls done")
        assert woken.is_set() and gate.most == 2
        report = pre.report()
        assert report["a:1"]["state"] == "pulled" and report["b:1"]["state"] == "pulled"
        assert report["c:1"]["state"] == "failed" and "manifest unknown" in report["c:1"]["error"]
        pre.want(["c:1"])  # still asked: a failed pull stays failed (not retried every pass)
        assert set(pre.report()) == {"c:1"} and pre.report()["c:1"]["state"] == "failed"
        pre.want([])
        assert pre.report() == {}
    finally:
        pre.stop()


def test_the_store_keeps_prefetch_topics_apart_from_the_desired_state() -> None:
    store = DesiredStore(T, "n1")
    assert store.apply(T.prefetch("n1", "lab"), json.dumps({"images": ["web:2"]}).encode())
    assert store.apply(T.prefetch("n1", "prod"), json.dumps({"images": ["web:2", "db:9"]}).encode())
    assert store.prefetch() == ["db:9", "web:2"]
    assert store.snapshot().containers == {} and store.errors() == {}
    assert store.apply(T.prefetch("n1", "prod"), None)
    assert store.prefetch() == ["web:2"]
    store.apply(T.prefetch("n1", "lab"), b'{"images": "web:2"}')
    assert "desired-prefetch" in store.errors()[T.prefetch("n1", "lab")]
    assert store.prefetch() == ["web:2"]  # the last valid one stays


def test_pull_settings() -> None:
    assert AgentSettings.from_env({"PHRAME_NODE_NAME": "n1"}).pull_ahead is True
    assert (
        AgentSettings.from_env({"PHRAME_NODE_NAME": "n1", "PHRAME_PULL_AHEAD": "false"}).pull_ahead is False
    )
    assert AgentSettings.from_env({"PHRAME_NODE_NAME": "n1"}).pull_parallelism == 2
    assert (
        AgentSettings.from_env({"PHRAME_NODE_NAME": "n1", "PHRAME_PULL_PARALLELISM": "5"}).pull_parallelism
        == 5
    )
    try:
        AgentSettings.from_env({"PHRAME_NODE_NAME": "n1", "PHRAME_PULL_PARALLELISM": "0"})
    except Exception as e:
        assert "PHRAME_PULL_PARALLELISM" in str(e)
    else:
        raise AssertionError("PHRAME_PULL_PARALLELISM=0 accepted")
