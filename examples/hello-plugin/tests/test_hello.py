"""The hello plugin on a hand-made snapshot: one row per namespace, views for the dashboard."""

from __future__ import annotations

import pandas as pd
from hello_pulsar_lens import HelloNamespaces

from pulsar_lens.api import Chart, Columns, Inputs, Metric, Table
from pulsar_lens.plugins.registry import validate_plugin

SNAPSHOT = "sha256:one"


def inputs() -> Inputs:
    topics = pd.DataFrame(
        {
            "snapshot_id": [SNAPSHOT] * 3,
            "namespace": ["public/default", "public/default", "acme/prod"],
            "topic": [
                "persistent://public/default/a",
                "persistent://public/default/b",
                "persistent://acme/prod/c",
            ],
        }
    )
    subs = pd.DataFrame(
        {
            "snapshot_id": [SNAPSHOT] * 2,
            "topic": ["persistent://public/default/a", "persistent://acme/prod/c"],
            "subscription": ["s1", "s2"],
            "msg_backlog": [5, 7],
        }
    )
    return Inputs(
        tables={"topics": topics, "subscriptions": subs},
        snapshots=pd.DataFrame({"snapshot_id": [SNAPSHOT]}),
    )


def test_hello_passes_the_contract_validation() -> None:
    assert validate_plugin(HelloNamespaces, "test").name == "hello-namespaces"


def test_hello_counts_per_namespace() -> None:
    plugin = HelloNamespaces()
    result = plugin.analyze(inputs(), HelloNamespaces.Params())
    assert result.frames["namespaces"].to_dict("records") == [
        {"namespace": "acme/prod", "topics": 1, "subscriptions": 1, "backlog": 7},
        {"namespace": "public/default", "topics": 2, "subscriptions": 1, "backlog": 5},
    ]


def test_hello_min_topics_hides_small_namespaces() -> None:
    plugin = HelloNamespaces()
    result = plugin.analyze(inputs(), HelloNamespaces.Params(min_topics=2))
    assert list(result.frames["namespaces"]["namespace"]) == ["public/default"]


def test_hello_renders_a_metric_then_a_chart_beside_a_table() -> None:
    plugin = HelloNamespaces()
    views = plugin.render(plugin.analyze(inputs(), HelloNamespaces.Params()))
    assert [type(v) for v in views] == [Metric, Columns]
    chart, table = (column[0] for column in views[1].columns)
    assert isinstance(chart, Chart) and isinstance(table, Table)
