"""deploy/prometheus: the alert rules pass `promtool check rules`, every alert is unit-tested
by `promtool test rules` both firing and quiet, the rules read only series the exporter
serves, and their annotations name the labels those series carry."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.prometheus_server import PROMTOOL
from tests.deploy.promql import metric_names
from tests.deploy.served import recorded_exporter, scrape, served_families

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = DEPLOY / "alerts.yml"
RULE_TESTS = DEPLOY / "alerts.test.yml"
SEVERITIES = {"critical", "warning", "info"}
PROMETHEUS_OWN = {"up"}  # the per-target series Prometheus itself writes at each scrape


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMTOOL, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120, check=False
    )


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


@pytest.fixture(scope="module")
def served_labels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Series name -> the label names it carries on a real scrape of the exporter."""
    from prometheus_client.parser import text_string_to_metric_families

    with recorded_exporter(tmp_path_factory.mktemp("store")) as server:
        text = scrape(server)
    labels: dict[str, set[str]] = {}
    for names in served_families(text).values():
        for name in names:
            labels.setdefault(name, set())
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels[sample.name] |= set(sample.labels)
    return labels


def test_alerts_promtool_check_rules_passes() -> None:
    done = promtool("check", "rules", RULES.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout


def test_alerts_promtool_unit_tests_pass() -> None:
    done = promtool("test", "rules", RULE_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_alerts_example_prometheus_config_is_valid() -> None:
    done = promtool("check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_each_is_unit_tested_firing_and_quiet() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested quiet"
    assert (firing | quiet) - names == set(), "tests of alerts that do not exist"


def test_alerts_each_has_severity_summary_and_description() -> None:
    for rule in alert_rules():
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and annotations["description"].strip()
        assert "$labels.cluster" in annotations["summary"], rule["alert"]
        assert "$labels.cluster" in annotations["description"], rule["alert"]


def test_alerts_read_only_served_series(served_labels: dict[str, set[str]]) -> None:
    for rule in alert_rules():
        names = metric_names(rule["expr"])
        assert names, f"{rule['alert']}: no metric in {rule['expr']!r}"
        unknown = names - set(served_labels) - PROMETHEUS_OWN
        assert not unknown, f"{rule['alert']} reads series the exporter does not serve"


def test_alerts_describe_every_label_of_their_series(served_labels: dict[str, set[str]]) -> None:
    """An alert on per-topic/subscription/group/plugin series names them in its description."""
    for rule in alert_rules():
        carried = set().union(*(served_labels.get(n, set()) for n in metric_names(rule["expr"])))
        for label in carried & {"topic", "subscription", "group", "plugin"}:
            assert f"$labels.{label}" in rule["annotations"]["description"], (rule["alert"], label)


def test_alerts_metric_names_parser_ignores_functions_labels_and_ranges() -> None:
    expr = (
        'sum by (cluster) (rate(pulsar_lens_polls_total{cluster=~"$cluster",topic!="x"}'
        "[$__rate_interval])) / on (cluster) group_left max without (instance) "
        "(pulsar_lens_snapshot_age_seconds offset 5m) > bool 1.5e3"
    )
    assert metric_names(expr) == {"pulsar_lens_polls_total", "pulsar_lens_snapshot_age_seconds"}


def expected_links() -> dict[str, str]:
    """Alert name -> the `dashboard_url` its firing unit tests expect (a non-empty one)."""
    links: dict[str, str] = {}
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            for alert in check.get("exp_alerts") or []:
                link = alert.get("exp_annotations", {}).get("dashboard_url")
                if link:
                    links[check["alertname"]] = link
    return links


def test_alerts_link_to_the_dashboard_page_that_takes_their_subscription() -> None:
    """Every alert on per-subscription series links to a page of the dashboard's page plan,
    with query names that are that page's controls (or the sidebar's cluster); the links the
    unit tests expect are of the same shape."""
    from urllib.parse import parse_qs, urlsplit

    from pulsar_lens.dashboard.navigation import page_plan
    from pulsar_lens.plugins.registry import discover

    registry = discover(entry_points=False, plugin_dirs=())
    pages = {s.url_path: s for specs in page_plan(registry).values() for s in specs}
    linked = {r["alert"] for r in alert_rules() if "dashboard_url" in r["annotations"]}
    about_subscriptions = {
        r["alert"]
        for r in alert_rules()
        if "$labels.subscription" in r["annotations"]["description"]
    }
    assert linked == about_subscriptions
    links = expected_links()
    assert set(links) == linked, "alerts whose link no unit test shows"
    for alert, link in links.items():
        parts = urlsplit(link)
        spec = pages.get(parts.path.lstrip("/"))
        assert spec is not None and spec.kind == "analysis", (alert, parts.path)
        plugin = registry.get(spec.target).plugin
        query = parse_qs(parts.query)
        assert "subscription" in query, alert
        assert plugin.page is not None and "subscription" in plugin.page.controls, alert
        assert set(query) - {"cluster"} <= set(plugin.Params.model_fields), alert
