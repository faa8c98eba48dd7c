"""The sidebar's cluster choice: shown for a store of several clusters, and every page then
reads the chosen cluster's snapshots."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.data import CLUSTER_KEY
from tests.core.snapshots import make_snapshot
from tests.dashboard.conftest import APP, TIMEOUT


def write_two_clusters(root: Path) -> None:
    """east with 2 topics, then west with 5 topics polled last (the default choice)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    store = Store(root)
    store.write(make_snapshot(at=now - dt.timedelta(seconds=2), cluster="east", topics=2))
    store.write(make_snapshot(at=now - dt.timedelta(seconds=1), cluster="west", topics=5))


def metric(at: AppTest, label: str) -> str:
    return next(str(m.value) for m in at.metric if m.label == label)


def test_selector_lists_the_clusters_and_defaults_to_the_newest_poll(store_dir: Path) -> None:
    write_two_clusters(store_dir)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    select = at.sidebar.selectbox(key=CLUSTER_KEY)
    assert list(select.options) == ["west", "east"] and select.value == "west"
    assert metric(at, "Topics") == "5"
    assert "**Cluster** west" in [m.value for m in at.sidebar.markdown]


def test_choosing_a_cluster_shows_its_own_snapshot(store_dir: Path) -> None:
    write_two_clusters(store_dir)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    at.sidebar.selectbox(key=CLUSTER_KEY).set_value("east").run()
    assert not at.exception
    assert metric(at, "Topics") == "2"
    assert "**Cluster** east" in [m.value for m in at.sidebar.markdown]
    at.switch_page("app_pages/plugins.py").run()  # the choice holds on another page
    assert at.sidebar.selectbox(key=CLUSTER_KEY).value == "east"


def test_no_selector_with_one_cluster(store_dir: Path) -> None:
    Store(store_dir).write(make_snapshot(at=dt.datetime.now(dt.UTC), cluster="solo"))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert len(at.sidebar.selectbox) == 0
    assert "**Cluster** solo" in [m.value for m in at.sidebar.markdown]
