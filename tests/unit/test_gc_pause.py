"""The cyclic collector is held off while a sync runs, and comes back after it."""

from __future__ import annotations

import gc
import threading

import pytest

from config_sync.intake.syncing import Syncer
from phrame.runtime.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_disabled_inside_enabled_after():
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_enabled_again_after_an_error():
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_and_concurrent_uses_resume_only_when_the_last_leaves():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with gc_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_left_disabled_if_it_was_disabled_before():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_sync_ref_runs_with_the_collector_held_off():
    seen = []

    class Stub:
        def _sync_ref(self, ref, *, fetch):
            seen.append((ref, fetch, gc.isenabled()))
            return "outcome"

    assert Syncer.sync_ref(Stub(), "main") == "outcome"  # type: ignore[arg-type]
    assert Syncer.sync_ref(Stub(), "dev", fetch=False) == "outcome"  # type: ignore[arg-type]
    assert seen == [("main", True, False), ("dev", False, False)]
    assert gc.isenabled()


def test_publish_commit_runs_with_the_collector_held_off():
    from config_sync.publication.sender import DesiredPublisher

    seen = []

    class Stub:
        def _publish_commit(self, **kw):
            seen.append((kw["ref"], gc.isenabled()))
            return "outcome"

    out = DesiredPublisher.publish_commit(  # type: ignore[arg-type]
        Stub(), ref="main", commit="c", claim=None, rendered=None, errors=[]
    )
    assert out == "outcome"
    assert seen == [("main", False)]
    assert gc.isenabled()
