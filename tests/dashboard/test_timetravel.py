"""Time travel: the sidebar's choice of the snapshot shown, kept in `?at=`, a refused `at`
named on the page, and the banner that says a past snapshot is shown, with its way back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.markdown import WORD_JOINER
from pulsar_lens.core.model import EndpointError
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.data import SNAPSHOT_KEY, PastView
from pulsar_lens.dashboard.spark_jobs import NOT_TRAVELLED
from tests import pages
from tests.core.snapshots import make_snapshot
from tests.dashboard.conftest import APP, TIMEOUT

AGO = dt.timedelta(minutes=41, seconds=5)


def write_two_polls(root: Path) -> tuple[str, str]:
    """A poll with 2 topics 41 min ago, then one with 5 topics a second ago; their ids."""
    store = Store(root)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    store.write(make_snapshot(at=now - AGO, topics=2))
    store.write(make_snapshot(at=now - dt.timedelta(seconds=1), topics=5))
    first, newest = (str(s) for s in store.snapshots()["snapshot_id"])
    return first, newest


def times(root: Path) -> list[str]:
    """The polls' times as the dashboard writes them, oldest first."""
    return [f"{t:%Y-%m-%d %H:%M:%S} UTC" for t in Store(root).snapshots()["collected_at"]]


def app(at: str | None = None) -> AppTest:
    test = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if at is not None:
        test.query_params["at"] = at
    return test.run()


def metric(at: AppTest, label: str) -> str:
    return next(str(m.value) for m in at.metric if m.label == label)


def plain(markdown: str) -> str:
    """Text escaped by `escape_markdown` as it reads."""
    return markdown.replace("\\", "").replace(WORD_JOINER, "")


def banners(at: AppTest) -> list[str]:
    return [i.value for i in at.info if "Viewing the snapshot" in i.value]


def test_timetravel_control_offers_the_snapshots_newest_first(store_dir: Path) -> None:
    write_two_polls(store_dir)
    at = app()
    assert not at.exception
    control = at.sidebar.selectbox(key=SNAPSHOT_KEY)
    offered = list(control.options)
    assert offered[0] == "Newest" and len(offered) == 3
    assert [o.split(" · ")[0] for o in offered[1:]] == times(store_dir)[::-1]
    assert control.value == ""
    assert metric(at, "Topics") == "5" and not banners(at)
    assert "at" not in at.query_params


def test_timetravel_choosing_a_snapshot_shows_it_and_puts_it_in_the_url(store_dir: Path) -> None:
    first, _ = write_two_polls(store_dir)
    at = app()
    at.sidebar.selectbox(key=SNAPSHOT_KEY).set_value(first).run()
    assert not at.exception
    assert metric(at, "Topics") == "2"
    assert at.query_params["at"] == first
    assert "Errors of this poll" in [h.value for h in at.subheader]
    at.switch_page("app_pages/plugins.py").run()  # the choice holds on another page
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == first


def test_timetravel_at_in_the_url_restores_the_snapshot(store_dir: Path) -> None:
    first, _ = write_two_polls(store_dir)
    at = app(at=first)
    assert not at.exception
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == first
    assert metric(at, "Topics") == "2"
    assert at.query_params["at"] == first
    assert not at.warning


def test_timetravel_a_new_at_in_the_address_wins_a_dropped_one_keeps_the_choice(
    store_dir: Path,
) -> None:
    first, newest = write_two_polls(store_dir)
    at = app(at=first)
    at.query_params["at"] = newest  # the address changed under the page (the back button)
    at.run()
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == newest
    assert metric(at, "Topics") == "5" and banners(at)
    del at.query_params["at"]  # a page link drops the query
    at.run()
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == newest
    assert at.query_params["at"] == newest


def test_timetravel_banner_names_the_time_and_goes_back_to_newest(store_dir: Path) -> None:
    first, _ = write_two_polls(store_dir)
    at = app(at=first)
    (banner,) = [plain(b) for b in banners(at)]
    first_at, newest_at = times(store_dir)
    assert banner.startswith(f"Viewing the snapshot of {first_at}, ")
    assert banner.endswith(" ago — 1 newer poll(s) hidden on the Cluster pages.")
    # the sidebar still says when the newest poll came
    assert f"{newest_at} · 2 polls stored" in [c.value for c in at.sidebar.caption]
    at.button(key="travel_back").click().run()
    assert not at.exception
    assert not banners(at)
    assert metric(at, "Topics") == "5"
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == ""
    assert "at" not in at.query_params


def test_timetravel_a_past_partial_poll_is_called_this_snapshot_not_the_newest(
    store_dir: Path,
) -> None:
    """The banner of a partial poll shown from the past says that snapshot is partial: the
    newest, whole, is named partial nowhere."""
    store = Store(store_dir)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    failed = EndpointError("GET http://b1:8080/admin/v2/broker-stats/topics", 503, "Unavailable")
    store.write(make_snapshot(at=now - AGO, topics=2, errors=(failed,)))
    store.write(make_snapshot(at=now - dt.timedelta(seconds=1), topics=5))
    first, _ = (str(s) for s in store.snapshots()["snapshot_id"])
    past = app(at=first)
    assert not past.exception
    warnings = [w.value for w in past.warning]
    assert any(w.startswith("This snapshot is partial: 1 admin call(s) failed") for w in warnings)
    assert not any("newest snapshot is partial" in w for w in warnings), warnings
    newest = app()
    assert not [w.value for w in newest.warning if "partial" in w.value]


def test_timetravel_malformed_at_is_named_and_the_newest_shown(store_dir: Path) -> None:
    write_two_polls(store_dir)
    at = app(at="**yesterday**")
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    assert "not a snapshot id" in warning and "\\*\\*yesterday\\*\\*" in warning
    assert metric(at, "Topics") == "5" and not banners(at)
    assert "at" not in at.query_params


@pytest.mark.parametrize("prefix", ["sha256t:", "sha256:"])  # ids stored before sha256t: too
def test_timetravel_unknown_at_is_named_and_the_newest_shown(store_dir: Path, prefix: str) -> None:
    write_two_polls(store_dir)
    pruned = prefix + "0" * 64
    at = app(at=pruned)
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    assert "not in this store" in warning and "pruned" in warning
    assert metric(at, "Topics") == "5"
    assert at.sidebar.selectbox(key=SNAPSHOT_KEY).value == ""


def test_timetravel_plugin_page_analyses_the_snapshot_shown(store_dir: Path) -> None:
    first, _ = write_two_polls(store_dir)
    newest = pages.plugin_page("subscription-status", timeout=TIMEOUT)
    past = pages.plugin_page("subscription-status", timeout=TIMEOUT, state={SNAPSHOT_KEY: first})
    assert not newest.exception and not past.exception
    assert len(newest.dataframe[0].value) == 5
    assert len(past.dataframe[0].value) == 2


def test_timetravel_spark_page_says_it_is_not_travelled(store_dir: Path) -> None:
    first, _ = write_two_polls(store_dir)
    page = pages.plugin_page("stuck-hash-history", timeout=TIMEOUT, state={SNAPSHOT_KEY: first})
    assert not page.exception
    assert NOT_TRAVELLED in [i.value for i in page.info]


def test_timetravel_no_control_before_the_second_poll(store_dir: Path) -> None:
    Store(store_dir).write(make_snapshot(at=dt.datetime.now(dt.UTC), topics=2))
    only = str(Store(store_dir).snapshots()["snapshot_id"].iloc[0])
    at = app(at=only)
    assert not at.exception
    assert len(at.sidebar.selectbox) == 0 and not banners(at) and not at.warning
    assert metric(at, "Topics") == "2"
    assert "at" not in at.query_params


def probe_rows(*sent: dt.datetime) -> pa.Table:
    """One received probe message per time, each written at its own time."""
    n = len(sent)
    return pa.table(
        {
            "snapshot_id": [f"probe-{i}" for i in range(n)],
            "collected_at": list(sent),
            "cluster": ["standalone"] * n,
            "probe": ["p1"] * n,
            "topic": ["persistent://public/default/probe"] * n,
            "namespace": ["public/default"] * n,
            "bundle": ["0x00000000_0xffffffff"] * n,
            "seq": list(range(n)),
            "sent_at": list(sent),
            "acked_at": list(sent),
            "received_at": list(sent),
            "publish_ms": [3.5] * n,
            "e2e_ms": [4.0] * n,
            "received": [1] * n,
            "error": [None] * n,
        }
    )


def test_timetravel_view_reads_probes_up_to_the_snapshot_shown(store_dir: Path) -> None:
    write_two_polls(store_dir)
    store = Store(store_dir)
    first_at, newest_at = (t.to_pydatetime() for t in store.snapshots()["collected_at"])
    before, after = first_at - dt.timedelta(seconds=5), first_at + dt.timedelta(seconds=5)
    store.write_table("probes", probe_rows(before, after))
    past = PastView(store, None, upto=first_at)
    assert past.read("probes", since=before)["seq"].to_pylist() == [0]
    assert past.read("probes", since=before, until=newest_at)["seq"].to_pylist() == [0]
    assert store.read("probes", since=before)["seq"].to_pylist() == [0, 1]
    assert past.latest_snapshot_id() == str(store.snapshots()["snapshot_id"].iloc[0])
