"""Desired against actual per item: in-sync, drift, missing, extra, failed, pending."""

from __future__ import annotations

from topic_api.drift import node_items

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def spec(digest: str = D1) -> dict:
    return {"image": "web:1", "digest": digest, "commit": "c" * 40}


def status_of(items: list[dict]) -> dict[str, str]:
    return {i["id"]: i["status"] for i in items}


def test_each_status() -> None:
    desired = {
        ("containers", "prod.ok.0"): spec(),
        ("containers", "prod.old.0"): spec(D2),
        ("containers", "prod.gone.0"): spec(),
        ("containers", "prod.crash.0"): spec(),
        ("containers", "prod.sick.0"): spec(),
    }
    actual = {
        ("containers", "prod.ok.0"): {"state": "running", "digest": D1},
        ("containers", "prod.old.0"): {"state": "running", "digest": D1},
        ("containers", "prod.crash.0"): {"state": "exited", "digest": D1, "exit_code": 1},
        ("containers", "prod.sick.0"): {"state": "running", "digest": D1, "health": "unhealthy"},
        ("containers", "prod.stray.0"): {"state": "running", "digest": D1},
    }
    items = node_items(desired, actual, None, pending=False)
    assert status_of(items) == {
        "prod.crash.0": "failed",
        "prod.gone.0": "missing",
        "prod.ok.0": "in-sync",
        "prod.old.0": "drift",
        "prod.sick.0": "failed",
        "prod.stray.0": "extra",
    }
    by_id = {i["id"]: i for i in items}
    assert by_id["prod.old.0"]["differences"] == [{"field": "digest", "desired": D2, "actual": D1}]
    assert by_id["prod.gone.0"]["differences"] == [{"field": "present", "desired": True, "actual": False}]
    assert {"field": "state", "desired": "running", "actual": "exited"} in by_id["prod.crash.0"][
        "differences"
    ]
    assert by_id["prod.ok.0"]["differences"] == []
    assert by_id["prod.ok.0"]["service"] == "ok" and by_id["prod.ok.0"]["environment"] == "prod"
    assert by_id["prod.ok.0"]["commit"] == "c" * 40


def test_a_node_behind_its_manifest_reports_pending_not_drift() -> None:
    desired = {("containers", "prod.new.0"): spec(D2), ("containers", "prod.web.0"): spec(D2)}
    actual = {("containers", "prod.web.0"): {"state": "running", "digest": D1}}
    items = node_items(desired, actual, None, pending=True)
    assert status_of(items) == {"prod.new.0": "pending", "prod.web.0": "pending"}


def test_manifest_items_without_a_topic_still_count() -> None:
    manifest = {"generation": 3, "commit": "c" * 40, "items": {"networks/prod.net": D1}}
    actual = {("networks", "prod.net"): {"state": "present", "digest": D1}}
    items = node_items({}, actual, manifest, pending=False)
    assert items[0]["kind"] == "networks" and items[0]["status"] == "in-sync"
    assert items[0]["service"] is None


def test_malformed_payloads_never_raise() -> None:
    items = node_items(
        {("containers", "prod.x.0"): "junk"}, {("containers", "prod.x.0"): 7}, "junk", pending=False
    )
    assert items[0]["status"] == "drift"
