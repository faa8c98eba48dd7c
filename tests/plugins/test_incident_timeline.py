"""incident-timeline: every kind of event on one axis, read from the plugins it requires and
the tables it reads, over a store built poll by poll."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Table
from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    DrainingHashRecord,
    EndpointError,
    EventRecord,
    ProbeRecord,
    Snapshot,
    SubscriptionRecord,
    records_to_table,
)
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard.navigation import OVERVIEW, page_plan
from pulsar_lens.dashboard.views import safe_link
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.incident_timeline import frames
from pulsar_lens.plugins.builtin.incident_timeline.links import LINK_FIELDS, PAGES, links
from pulsar_lens.plugins.builtin.shared.labels import subscription_label
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.testing import at, make_snapshot
from tests.hostile_names import HOSTILE

NS = "public/default"
TOPIC = "persistent://public/default/orders"
FO_TOPIC = "persistent://public/default/payments"
B1, B2 = "127.0.0.1:8080", "127.0.0.2:8080"
BUNDLE = "0x00000000_0xffffffff"
BACKLOGS = (0, 1, 5, 20, 3, 4)  # over the threshold of 10 at poll 3, under at poll 4
TIMES = (0, 30, 60, 90, 120, 300)  # the last poll comes after a gap


def _poll(i: int, *, sub: str = "billing", fo_sub: str = "fo") -> Snapshot:
    owner = B1 if i < 2 else B2
    unloaded = 0 if i < 2 else 1
    draining = (
        (DrainingHashRecord(TOPIC, sub, "c1", 7, 2, 3),) if i in (1, 2) else ()
    )  # a hash drains for c1 at polls 1 and 2
    return make_snapshot(
        TIMES[i],
        brokers=(
            BrokerRecord(B1, lb_bundles_unloaded=unloaded, lb_bundles_split=0),
            BrokerRecord(B2, lb_bundles_unloaded=0, lb_bundles_split=0),
        ),
        bundles=(BundleRecord(NS, "public", BUNDLE, 0, 0xFFFFFFFF, owner_broker=owner),),
        subscriptions=(
            SubscriptionRecord(TOPIC, sub, type="Key_Shared", msg_backlog=BACKLOGS[i]),
            SubscriptionRecord(FO_TOPIC, fo_sub, type="Failover", msg_backlog=0),
        ),
        # c1 reconnects at 55 s, between polls 1 and 2
        consumers=(ConsumerRecord(TOPIC, sub, "c1", connected_since=at(-10 if i < 2 else 55)),),
        draining_hashes=draining,
        errors=(EndpointError("GET /admin/v2/brokers/standalone", 500, "boom"),) if i == 4 else (),
    )


def _events(i: int, *, sub: str = "billing", fo_sub: str = "fo") -> list[EventRecord]:
    when = at(TIMES[i])
    if i == 2:
        return [
            EventRecord(when, "load_manager_unloaded", B1, before="0", after="1"),
            EventRecord(when, "consumer_left", f"{TOPIC}/{sub}/c1", None, TOPIC, sub, "c1"),
            EventRecord(when, "consumer_joined", f"{TOPIC}/{sub}/c1", None, TOPIC, sub, "c1"),
        ]
    if i == 3:
        return [
            EventRecord(
                when,
                "active_consumer_changed",
                f"{FO_TOPIC}/{fo_sub}",
                None,
                FO_TOPIC,
                fo_sub,
                before="a",
                after="b",
            ),
            EventRecord(
                when,
                "hash_ranges_changed",
                f"{TOPIC}/{sub}/c1",
                None,
                TOPIC,
                sub,
                "c1",
                before="[[0,10]]",
                after="[[0,20]]",
            ),
        ]
    return []


def _probes(store: Store) -> None:
    """A probe of the bundle whose publishes stall for 600 ms between polls 1 and 2."""
    rows = []
    for seq in range(10):
        sent = at(40 + seq * 0.1)
        ms = 600.0 - seq * 100 if 3 <= seq <= 5 else 3.0
        rows.append(
            ProbeRecord(
                "p",
                f"persistent://{NS}/probe",
                NS,
                BUNDLE,
                seq,
                sent,
                acked_at=sent + pd.Timedelta(milliseconds=ms).to_pytimedelta(),
                publish_ms=ms,
                received=1,
            )
        )
    table = records_to_table(
        "probes", rows, snapshot_id="probe-1", collected_at=at(45), cluster="standalone"
    )
    store.write_table("probes", table)


def build_store(root: Path, polls: int = len(TIMES), **names: str) -> Store:
    store = Store(root)
    for i in range(polls):
        store.write(_poll(i, **names), events=_events(i, **names))
    _probes(store)
    return store


def timeline(store: Store, **params: Any) -> pd.DataFrame:
    plugin = discover().get("incident-timeline")
    params = {"backlog_threshold": 10, **params}
    output = runner.run(plugin, store, params, use_cache=False, use_stored=False)
    return output.result.frames["events"]


def kinds(frame: pd.DataFrame) -> list[str]:
    return list(frame["kind"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return build_store(tmp_path_factory.mktemp("timeline"))


@pytest.fixture(scope="module")
def events(store: Store) -> pd.DataFrame:
    return timeline(store)


def test_incident_timeline_lists_every_kind_in_time_order(events: pd.DataFrame) -> None:
    assert kinds(events) == [
        "draining_started",  # 30
        "probe_outage",  # 40.2: the last good acknowledgement before the stall
        "consumer_reconnected",  # 55
        "load_manager_unloaded",  # 60
        "bundle_moved",
        "consumer_left",
        "consumer_joined",
        "active_consumer_changed",  # 90
        "hash_ranges_changed",
        "draining_ended",
        "backlog_over",
        "poll_partial",  # 120
        "backlog_under",
        "poll_missing",  # 300
    ]
    assert events["at"].is_monotonic_increasing
    assert str(events["at"].dtype) == "datetime64[us, UTC]"


def test_incident_timeline_says_who_made_each_event(events: pd.DataFrame) -> None:
    who = dict(zip(events["kind"], events["source"], strict=True))
    assert who["bundle_moved"] == "load manager"  # its counter grew in that window
    assert who["load_manager_unloaded"] == "load manager"
    assert who["probe_outage"] == "probe"
    assert who["consumer_left"] == who["consumer_joined"] == who["consumer_reconnected"] == "client"
    assert who["active_consumer_changed"] == "broker"
    assert who["poll_partial"] == who["poll_missing"] == "collector"
    moved = events[events["kind"] == "bundle_moved"].iloc[0]
    assert (moved["namespace"], moved["subject"]) == (NS, BUNDLE)
    assert B1 in moved["detail"] and B2 in moved["detail"]


def test_incident_timeline_names_the_explaining_page_and_poll(
    store: Store, events: pd.DataFrame
) -> None:
    index = store.snapshots()
    ids = list(index["snapshot_id"])
    page = dict(zip(events["kind"], events["page"], strict=True))
    poll = dict(zip(events["kind"], events["snapshot_id"], strict=True))
    assert page["bundle_moved"] == page["probe_outage"] == "bundles"
    assert page["draining_started"] == "stuck-hashes"
    assert page["active_consumer_changed"] == "failover"
    assert page["consumer_left"] == page["hash_ranges_changed"] == "key-shared"
    assert page["backlog_over"] == "subscriptions"
    assert page["consumer_reconnected"] == "key-shared"
    assert poll["consumer_reconnected"] == ids[2]
    assert page["poll_partial"] == "overview"
    assert poll["probe_outage"] == ids[2]  # the first poll after the outage
    assert poll["bundle_moved"] == ids[2]
    assert poll["poll_missing"] == ids[5]
    outage = events[events["kind"] == "probe_outage"].iloc[0]
    query = parse_qs(urlsplit(outage["link"]).query)
    assert urlsplit(outage["link"]).path == "bundles"
    assert query == {"at": [ids[2]], "cluster": ["standalone"], "namespace": [NS]}
    # each page's controls in the form it takes (dashboard.urlstate sets them from the query)
    control = {
        kind: parse_qs(urlsplit(url).query).get("subscription")
        for kind, url in zip(events["kind"], events["link"], strict=True)
    }
    assert control["consumer_left"] == [subscription_label(TOPIC, "billing")]
    assert control["active_consumer_changed"] == [f"fo @ {FO_TOPIC}"]
    assert control["backlog_over"] == ["billing"]


def test_incident_timeline_links_set_controls_the_opened_page_has(events: pd.DataFrame) -> None:
    """Every name a link puts in its query (but `at` and `cluster`) is a control of the page
    it opens, so the page shows the row's namespace, topic or subscription."""
    registry = discover()
    slug_of = {path: slug for slug, path in PAGES.items()}
    checked = set()
    for page, url in zip(events["page"], events["link"], strict=True):
        names = set(parse_qs(urlsplit(url).query)) - {"at", "cluster"}
        if slug_of[page] == "overview" or not names:
            continue
        opened = registry.get(slug_of[page]).plugin.page
        assert opened is not None and names <= set(opened.controls), (page, names)
        checked.add(page)
    assert checked == {"stuck-hashes", "key-shared", "failover", "bundles", "subscriptions"}


def test_incident_timeline_pages_are_where_the_dashboard_serves_them() -> None:
    served = {
        spec.target: spec.url_path
        for specs in page_plan(discover().plugins.values()).values()
        for spec in specs
        if spec.kind == "analysis"
    }
    served["overview"] = OVERVIEW.url_path
    assert {slug: served[slug] for slug in PAGES} == dict(PAGES)
    assert served["incident-timeline"] == "timeline"


def test_incident_timeline_window_keeps_the_newest_polls(store: Store) -> None:
    newest = timeline(store, window=2)
    assert kinds(newest) == ["poll_partial", "backlog_under", "poll_missing"]


def test_incident_timeline_filters_keep_rows_that_name_no_such_thing(store: Store) -> None:
    failover = timeline(store, topic=FO_TOPIC, subscription="fo")
    assert "active_consumer_changed" in kinds(failover)
    assert not {"consumer_left", "backlog_over", "draining_started"} & set(kinds(failover))
    # the topic's namespace's bundle moves, polls and counters stay
    assert {"bundle_moved", "poll_partial", "load_manager_unloaded"} <= set(kinds(failover))
    elsewhere = timeline(store, namespace="other/ns")
    assert set(kinds(elsewhere)) == {"load_manager_unloaded", "poll_partial", "poll_missing"}


SYSTEM = "persistent://public/default/__change_events"


def test_incident_timeline_leaves_system_topics_out_unless_asked(tmp_path: Path) -> None:
    """A broker's own reader of `__change_events` joins and leaves like any client; an
    operator asks for those rows, or picks that topic, to see them."""
    store = Store(tmp_path)
    for i in range(3):
        events = _events(i)
        if i == 2:
            name = "reader-fZCBz"
            events.append(
                EventRecord(
                    at(TIMES[i]), "consumer_joined", f"{SYSTEM}/r/{name}", None, SYSTEM, "r", name
                )
            )
        store.write(_poll(i), events=events)
    plain = timeline(store)
    assert SYSTEM not in set(plain["topic"].dropna())
    assert kinds(plain).count("consumer_joined") == 1  # c1's, on an ordinary topic
    for asked in ({"include_system": True}, {"topic": SYSTEM}):
        shown = timeline(store, **asked)
        mine = shown[shown["topic"] == SYSTEM]
        assert list(mine["kind"]) == ["consumer_joined"] and list(mine["subject"]) == [
            "reader-fZCBz"
        ]


def test_incident_timeline_offers_the_names_it_saw(store: Store) -> None:
    plugin = discover().get("incident-timeline")
    choices = plugin.plugin.param_choices(runner.load_inputs(plugin, store))
    assert choices["namespace"] == ["", NS]
    assert choices["topic"] == ["", *sorted([TOPIC, FO_TOPIC])]
    assert choices["subscription"] == ["", "billing", "fo"]


def test_incident_timeline_of_an_empty_store_is_empty(tmp_path: Path) -> None:
    plugin = discover().get("incident-timeline")
    output = runner.run(plugin, Store(tmp_path), None, use_cache=False, use_stored=False)
    assert output.result.frames["events"].empty
    assert list(output.result.frames["events"].columns) == [
        "at",
        "kind",
        "source",
        "namespace",
        "topic",
        "subscription",
        "subject",
        "detail",
        "page",
        "snapshot_id",
        "link",
    ]
    assert [type(v).__name__ for v in output.views][-1] == "Note"


def test_incident_timeline_percent_encodes_hostile_names(tmp_path: Path) -> None:
    hostile = f"{HOSTILE} ?&#=%/\\ javascript:x"
    store = build_store(tmp_path, sub=hostile, fo_sub=hostile)
    events = timeline(store)
    mine = events[events["subscription"] == hostile]
    assert len(mine) >= 4
    for url in mine["link"]:
        parts = urlsplit(url)
        assert parts.scheme == "" and parts.netloc == "" and parts.path in PAGES.values()
        (value,) = parse_qs(parts.query)["subscription"]
        assert hostile in value
        assert not set(url) & set(" <>\"'`\n#\\")
        assert safe_link(url) == url
    assert hostile in set(events["subject"]) | set(events["subscription"])


def test_incident_timeline_renders_a_chart_with_links_and_a_linked_table(
    events: pd.DataFrame, store: Store
) -> None:
    plugin = discover().get("incident-timeline")
    output = runner.run(plugin, store, None, use_cache=False, use_stored=False)
    chart = next(v for v in output.views if isinstance(v, Chart))
    spec = chart.chart.to_dict()
    assert spec["encoding"]["href"]["field"] == "link"
    assert spec["encoding"]["color"]["field"] == "source"
    table = next(v for v in output.views if isinstance(v, Table))
    assert table.links == ("link",)
    assert table.frame["kind"].iloc[0] == "poll_missing"  # newest first


def link(page: str, snapshot: str, cluster: str | None, fields: dict[str, Any]) -> str:
    """The link `links` makes of one row."""
    frame = pd.DataFrame([{n: fields.get(n) for n in LINK_FIELDS}], dtype=object)
    return links(pd.Series([page]), pd.Series([snapshot]), {snapshot: cluster}, frame)[0]


def test_incident_timeline_link_encodes_every_value() -> None:
    url = link("subscriptions", "sha256:ab", "c l", {"topic": "a&b=c", "subscription": None})
    assert url == "subscriptions?at=sha256%3Aab&cluster=c%20l&topic=a%26b%3Dc"
    url = link("bundles", "s", None, {"namespace": "t/n#", "topic": "x"})
    assert url == "bundles?at=s&namespace=t%2Fn%23"


def test_incident_timeline_key_shared_label_is_the_pages_own() -> None:
    from pulsar_lens.plugins.builtin import key_shared_map

    assert key_shared_map.subscription_label is subscription_label


@pytest.mark.parametrize(
    ("by", "origin", "who"),
    [
        ("load manager", "snapshots", "load manager"),
        ("not the load manager", "snapshots", "admin or other"),
        (None, "snapshots", "unknown"),
        (None, "collector", "collector"),
    ],
)
def test_incident_timeline_bundle_rows_name_who_moved_it(by: Any, origin: str, who: str) -> None:
    moved: Sequence[dict[str, Any]] = [
        {
            "at": at(0),
            "kind": "moved",
            "namespace": NS,
            "bundle": BUNDLE,
            "before": B1,
            "after": B2,
            "detail": "",
            "source": origin,
            "by": by,
        }
    ]
    (row,) = frames.bundle_rows(pd.DataFrame(moved))
    assert (row["kind"], row["source"]) == ("bundle_moved", who)


def test_safe_link_refuses_other_schemes_and_hosts() -> None:
    assert safe_link("bundles?at=1") == "bundles?at=1"
    assert safe_link("https://example.org/x") == "https://example.org/x"
    for bad in ("javascript:alert(1)", "//evil.example/x", "\\\\evil.example", "data:x", None, ""):
        assert safe_link(bad) is None


HEADS = ("persistent://", "non-persistent://", "Persistent://", "", "foo://", "persistent:/")
PARTS = (
    "",
    " ",
    "a",
    "t-1",
    "ns",
    "\t",
    "é",
    "\ud800",
    "x/y",
    ":",
    "//",
    "p-partition-1",
    "\u00a0",
)


@pytest.mark.parametrize("seed", range(30))
def test_the_namespaces_are_those_of_reading_every_name(seed: int) -> None:
    rng = random.Random(seed)
    names = []
    for _ in range(400):
        parts = [rng.choice(PARTS) for _ in range(rng.randrange(1, 5))]
        names.append(rng.choice(HEADS) + "/".join(parts))
    names += [f"persistent://t{i % 3}/ns{i % 4}/topic-{i}" for i in range(200)]
    rng.shuffle(names)
    every = {ns for ns in map(frames.namespace_of, names) if ns}
    assert frames.namespaces_in(names) == every
    assert {"t0/ns0", "t2/ns3"} <= every
