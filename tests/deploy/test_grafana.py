"""deploy/grafana/pulsar-lens.json: a datasource and a cluster variable, every query names a
series the exporter really serves (scraped from /metrics over a snapshot of the recorded
admin API), every served family has a panel, and a real Prometheus that scraped that
/metrics evaluates every query; those that filter nothing return data."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.prometheus_server import PrometheusServer, wait_until
from tests.deploy.promql import metric_names, with_variables
from tests.deploy.served import recorded_exporter, scrape, served_families

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "pulsar-lens.json"
CLUSTER = "recorded"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


def exprs(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(board) for t in p.get("targets", [])]


def variable(board: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [v for v in board["templating"]["list"] if v["name"] == name]
    return dict(found)


def label_values_metric(query: str) -> str:
    match = re.fullmatch(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*(\w+)\s*\)", query)
    assert match, query
    return match.group(1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, PrometheusServer]]:
    """The exposition of a real /metrics, and a real Prometheus that has scraped it."""
    root = tmp_path_factory.mktemp("grafana")
    with recorded_exporter(root / "store") as exporter:
        text = scrape(exporter)
        target = f"127.0.0.1:{exporter.port}"
        with PrometheusServer(root / "prom", targets=[target], labels={"cluster": CLUSTER}) as p:
            wait_until(p.scraped, what="Prometheus to scrape /metrics", timeout=60)
            wait_until(  # two scrapes: rate() needs two samples
                lambda: p.query("count_over_time(pulsar_lens_polls_total[1m]) >= 2"),
                what="a second scrape",
                timeout=30,
            )
            yield text, p


def test_grafana_dashboard_has_datasource_and_cluster_variables() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41
    source = variable(board, "datasource")
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    cluster = variable(board, "cluster")
    assert cluster["type"] == "query" and cluster["datasource"] == DATASOURCE
    assert label_values_metric(cluster["query"]["query"]) == "pulsar_lens_polls_total"
    assert cluster["definition"] == cluster["query"]["query"]
    assert cluster["multi"] and cluster["includeAll"]


def test_grafana_every_query_uses_the_variables() -> None:
    board = dashboard()
    for panel in panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'cluster=~"$cluster"' in target["expr"], panel["title"]


def test_grafana_layout_is_well_formed() -> None:
    board = dashboard()
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["title"] and (panel["type"] == "row" or panel["description"])
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), panel["title"]


def test_grafana_queries_name_only_served_series(served: tuple[str, PrometheusServer]) -> None:
    board = dashboard()
    names = set().union(*served_families(served[0]).values())
    for expr in exprs(board):
        found = metric_names(expr)
        assert found, f"no metric in {expr!r}"
        assert found <= names, f"{expr!r} reads {found - names}, not served on /metrics"
    assert label_values_metric(variable(board, "cluster")["query"]["query"]) in names


def test_grafana_every_served_family_has_a_panel(served: tuple[str, PrometheusServer]) -> None:
    shown = set().union(*(metric_names(e) for e in exprs(dashboard())))
    families = served_families(served[0])
    assert len(families) >= 20, sorted(families)  # the recording exercises every family
    missing = sorted(f for f, names in families.items() if not names & shown)
    assert not missing, f"served families without a panel: {missing}"


def test_grafana_prometheus_evaluates_every_query(served: tuple[str, PrometheusServer]) -> None:
    text, prom = served
    with_samples = {
        name
        for names in served_families(text).values()
        for name in names
        if re.search(rf"^{re.escape(name)}(\{{| )", text, re.MULTILINE)
    }
    empty = []
    for expr in exprs(dashboard()):
        result = prom.query(with_variables(expr, {"cluster": CLUSTER}))
        filtered = re.search(r"==|!=|>|<", re.sub(r"\{[^}]*\}", "", expr))
        if not result and not filtered and metric_names(expr) & with_samples:
            empty.append(expr)
    assert not empty, f"queries of served series that return nothing: {empty}"
    # the cluster variable's own query, as Grafana asks it
    values = prom.api("label/cluster/values", **{"match[]": "pulsar_lens_polls_total"})
    assert values == [CLUSTER]


def data_links(board: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    for panel in panels(board):
        for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links", []):
            yield panel, link["url"]


def test_grafana_panels_link_to_the_dashboard_page_of_their_subscription() -> None:
    """Each panel of Key_Shared, Failover or subscription series links, through the lens_url
    variable (pulsar_lens_dashboard_info), to the dashboard page that shows that series: a
    page of the dashboard's page plan, its query names that page's fields or the cluster, the
    subscription one of its controls."""
    from urllib.parse import parse_qs, urlsplit

    from pulsar_lens.dashboard.navigation import page_plan
    from pulsar_lens.exporter.families import DASHBOARD_INFO
    from pulsar_lens.plugins.registry import discover

    board = dashboard()
    lens = variable(board, "lens_url")
    assert label_values_metric(lens["query"]["query"]) == DASHBOARD_INFO
    assert lens["definition"] == lens["query"]["query"] and lens["datasource"] == DATASOURCE
    registry = discover(entry_points=False, plugin_dirs=())
    pages = {s.url_path: s for specs in page_plan(registry).values() for s in specs}
    linked = {id(panel) for panel, _ in data_links(board)}
    per_subscription = re.compile(r"pulsar_lens_(subscription_|key_shared_|failover_|stuck_)")
    for panel in panels(board):
        for target in panel.get("targets", []):
            whole = not re.search(r"\b(sum|count) by", target["expr"])  # series, not a tally
            about = any(per_subscription.match(n) for n in metric_names(target["expr"]))
            assert id(panel) in linked or not (about and whole), panel["title"]
    for panel, url in data_links(board):
        assert url.startswith("${lens_url}/"), panel["title"]
        parts = urlsplit(url.removeprefix("${lens_url}"))
        spec = pages.get(parts.path.lstrip("/"))
        assert spec is not None and spec.kind == "analysis", (panel["title"], parts.path)
        plugin = registry.get(spec.target).plugin
        query = parse_qs(parts.query)
        assert set(query) - {"cluster"} <= set(plugin.Params.model_fields), panel["title"]
        if "subscription" in query:
            assert plugin.page is not None and "subscription" in plugin.page.controls
        fields = re.findall(r"\$\{__(?:field\.labels|data\.fields)\.(\w+):percentencode\}", url)
        assert "cluster" in fields and len(fields) == url.count("${__"), panel["title"]
