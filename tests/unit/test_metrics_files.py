"""The Grafana dashboard and the Prometheus alert rules in ``compose/`` are well formed:
every panel queries the datasource variable, every rule has ``for:``, a severity, a summary
and a description; ``promtool check rules`` passes where it is installed. (That every name
they use is a metric the services export is checked against real scrapes in
tests/integration/test_metrics.py.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
DASHBOARD = COMPOSE / "grafana" / "phrame.json"
ALERTS = COMPOSE / "prometheus" / "alerts.yml"
SCRAPE = COMPOSE / "prometheus" / "prometheus.yml"
NAME = re.compile(r"\bphrame_[a-z0-9_]+")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")
WANTED_ALERTS = {"PhrameNodeOffline", "PhrameDeployFailed", "PhrameDriftPersisting", "PhrameSyncFailing"}


def family(sample: str) -> str:
    """The metric family a sample name belongs to (``x_total`` -> ``x``)."""
    for suffix in SUFFIXES:
        if sample.endswith(suffix):
            return sample.removesuffix(suffix)
    return sample


def dashboard_panels() -> list[dict[str, Any]]:
    return [p for p in json.loads(DASHBOARD.read_text("utf-8"))["panels"] if p["type"] != "row"]


def alert_rules() -> list[dict[str, Any]]:
    doc = YAML(typ="safe").load(ALERTS.read_text("utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def used_metrics() -> dict[str, str]:
    """Metric family -> where it is used (a panel or rule title), from both files."""
    used: dict[str, str] = {}
    for panel in dashboard_panels():
        for target in panel["targets"]:
            for name in NAME.findall(target["expr"]):
                used.setdefault(family(name), f"panel {panel['title']!r}")
    for rule in alert_rules():
        for name in NAME.findall(rule["expr"]):
            used.setdefault(family(name), f"alert {rule['alert']}")
    return used


def test_every_panel_queries_the_datasource_variable_with_an_expression() -> None:
    doc = json.loads(DASHBOARD.read_text("utf-8"))
    assert [v["name"] for v in doc["templating"]["list"] if v["type"] == "datasource"] == ["datasource"]
    panels = dashboard_panels()
    assert len(panels) >= 20
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"]), "panel ids must be unique"
    for panel in panels:
        where = f"panel {panel['title']!r}"
        assert panel["datasource"]["uid"] == "${datasource}", where
        assert panel["targets"], where
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", where
            assert NAME.search(target["expr"]), f"{where}: no phrame_ metric in {target['expr']!r}"
            assert target["expr"].count("(") == target["expr"].count(")"), where


def test_alert_rules_have_for_severity_summary_and_description() -> None:
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= WANTED_ALERTS
    for rule in rules:
        where = f"alert {rule.get('alert')}"
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, where
        assert re.fullmatch(r"\d+[smh]", str(rule["for"])), where
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), where
        assert {"summary", "description"} <= set(rule["annotations"]), where
        assert NAME.search(rule["expr"]), where


def test_the_scrape_config_loads_the_rules_and_names_every_service() -> None:
    doc = YAML(typ="safe").load(SCRAPE.read_text("utf-8"))
    assert doc["rule_files"] == ["alerts.yml"]
    jobs = {job["job_name"] for job in doc["scrape_configs"]}
    assert jobs == {f"phrame-{s}" for s in ("config-sync", "topic-api", "placement", "mirror", "node-agent")}


def test_promtool_accepts_the_rules_and_the_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:  # Debian's `prometheus` package (about 19 MB): not installed by install-deps
        pytest.skip("promtool is not installed (Debian package prometheus); the schema tests above ran")
    done = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
