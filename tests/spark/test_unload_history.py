"""unload-history on Spark equals the same rule on pandas (whose outages are unload-latency's
own `probe_outages`), frame for frame, and finds what a hand-made history holds."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Chart, Metric, Note, Result, Table
from pulsar_lens.core.bundles import bundle_name
from pulsar_lens.core.model import BundleRecord, ProbeRecord, records_to_table
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.shared.outages import OUTAGE_COLUMNS, probe_outages
from pulsar_lens.plugins.builtin.unload_history import UnloadHistory
from pulsar_lens.plugins.builtin.unload_history.frames import OUTAGES
from pulsar_lens.plugins.builtin.unload_history.reference import pandas_result
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.testing import at, make_snapshot
from tests.markdown import shown
from tests.pages import plugin_page

pytestmark = pytest.mark.spark

PLUGIN = UnloadHistory()
NS = "public/default"
HALF = 0x80000000
LOW = (0x00000000, HALF)
HIGH = (HALF, 0xFFFFFFFF)
OTHER_NS = "acme/orders"
FAST = 3.0


def _bundle(ns: str, bounds: tuple[int, int], owner: str | None) -> BundleRecord:
    return BundleRecord(ns, ns.split("/")[0], bundle_name(*bounds), bounds[0], bounds[1], owner)


def _probe(
    probe: str, ns: str, bounds: tuple[int, int], publish: list[float | None], **kw: Any
) -> list[ProbeRecord]:
    """One probe run: message i sent at `start + i * every` seconds, acknowledged publish[i]
    ms later (None: never, and never received); `received` overrides per seq."""
    start, every = kw.get("start", 0.0), kw.get("every", 1.0)
    received: dict[int, int] = kw.get("received", {})
    rows = []
    for seq, ms in enumerate(publish):
        sent = at(start + seq * every)
        acked = None if ms is None else sent + dt.timedelta(milliseconds=ms)
        rows.append(
            ProbeRecord(
                probe=probe,
                topic=f"persistent://{ns}/lens-probe-{probe}",
                namespace=ns,
                bundle=bundle_name(*bounds),
                seq=seq,
                sent_at=sent,
                acked_at=acked,
                received_at=acked,
                publish_ms=ms,
                e2e_ms=ms,
                received=received.get(seq, 0 if ms is None else 1),
                error="timeout" if ms is None else None,
            )
        )
    return rows


def _write_probes(store: Store, rows: Iterable[ProbeRecord], *, written: float) -> None:
    """A batch of probe rows as the probe's sink writes it, collected at T0 + `written` s, of
    the cluster the polls name (the Spark inputs keep only the rows of the polls' clusters)."""
    table = records_to_table(
        "probes",
        list(rows),
        snapshot_id=f"probe-{written}",
        collected_at=at(written),
        cluster="standalone",
    )
    store.write_table("probes", table)


def _run(store: Store, **params: Any) -> runner.RunOutput:
    return runner.run(PLUGIN, store, params, use_cache=False, use_stored=False)


def assert_same(spark: Result, plain: Result) -> None:
    assert set(spark.frames) == set(plain.frames) == set(PLUGIN.outputs)
    for name, frame in plain.frames.items():
        pd.testing.assert_frame_equal(spark.frames[name], frame, obj=name)
    assert spark.summary == pytest.approx(plain.summary)


# -- a hand-made history ---------------------------------------------------------------------


def hand_store(root: Path) -> Store:
    """Five polls 30 s apart. LOW moves from b1 to b2 between the polls at 30 s and 60 s;
    HIGH is first listed at 60 s, by b3; OTHER_NS's bundle is owned by b1 throughout."""
    store = Store(root)
    for i in range(5):
        bundles = [_bundle(NS, LOW, "b1" if i < 2 else "b2"), _bundle(OTHER_NS, LOW, "b1")]
        if i >= 2:
            bundles.append(_bundle(NS, HIGH, "b3"))
        store.write(make_snapshot(30.0 * i, bundles=bundles))
    low = [FAST] * 150
    low[0] = 120.0  # the first message: cut at its own send
    low[40:43] = [300.0, None, 200.0]  # the unload: queued, one never acknowledged
    high = [FAST] * 150
    high[10:12] = [None, None]  # never acknowledged: back at the next good one
    high[100] = 80.0  # slow once, on b3's watch
    high[140] = 700.0  # after the newest poll (120 s), still read
    quiet = [FAST] * 150  # no outage, but duplicate deliveries
    rows = [
        *_probe("p1", NS, LOW, low, received={41: 0}),
        *_probe("p2", NS, HIGH, high),
        *_probe("p3", OTHER_NS, LOW, quiet, received={5: 2, 6: 3}),
    ]
    # the probe's sink writes batches on its own clock: one before the newest poll, one after
    _write_probes(store, [r for r in rows if r.seq < 60], written=61.0)
    _write_probes(store, [r for r in rows if r.seq >= 60], written=151.0)
    return store


@pytest.fixture(scope="module")
def hand(spark: object, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    root = tmp_path_factory.mktemp("unload-history")
    return root, _run(hand_store(root)).result


def test_hand_outages_are_cut_and_attributed_as_defined(hand: tuple[Path, Result]) -> None:
    _, result = hand
    ms = dt.timedelta(milliseconds=1)
    cuts = [at(0), at(9) + 3 * ms, at(39) + 3 * ms, at(99) + 3 * ms, at(139) + 3 * ms]
    backs = [at(0), at(12), at(40), at(100), at(140)]
    expected = pd.DataFrame(
        {
            "probe": ["p1", "p2", "p1", "p2", "p2"],
            "first_seq": [0, 10, 40, 100, 140],
            "last_seq": [0, 11, 42, 100, 140],
            "cut_at": pd.to_datetime(cuts, utc=True).astype("datetime64[us, UTC]"),
            "back_at": pd.to_datetime(
                [t + d * ms for t, d in zip(backs, [120, 3, 300, 80, 700], strict=True)], utc=True
            ).astype("datetime64[us, UTC]"),
            "outage_ms": [120.0, 3000.0, 1297.0, 1077.0, 1697.0],
            "delayed": [1, 2, 3, 1, 1],
            "lost": [0, 2, 1, 0, 0],
            "broker": ["b1", "(unknown)", "b1", "b3", "b3"],
            "moved": [False, False, True, False, False],
            "from_broker": pd.Series([None, None, "b1", None, None], dtype=object),
            "to_broker": pd.Series([None, None, "b2", None, None], dtype=object),
        }
    )
    outages = result.frames["outages"]
    pd.testing.assert_frame_equal(outages[expected.columns], expected, check_dtype=False)
    move = outages.iloc[2]
    assert (move["moved_since"], move["moved_at"]) == (at(30), at(60))


def test_hand_aggregates_per_bundle_broker_hour_and_day(hand: tuple[Path, Result]) -> None:
    _, result = hand
    by_bundle = result.frames["by_bundle"].set_index(["namespace", "bundle"])
    quiet = by_bundle.loc[(OTHER_NS, bundle_name(*LOW))]
    assert (quiet["messages"], quiet["duplicates"], quiet["outages"], quiet["moves"]) == (
        150,
        1 + 2,
        0,
        0,
    )
    assert pd.isna(quiet["max_ms"]) and pd.isna(quiet["median_ms"])
    bundles = result.frames["by_bundle"]
    order = list(zip(bundles["namespace"], bundles["bundle"], strict=True))
    assert order == [
        (NS, bundle_name(*HIGH)),
        (NS, bundle_name(*LOW)),
        (OTHER_NS, bundle_name(*LOW)),
    ]
    low = by_bundle.loc[(NS, bundle_name(*LOW))]
    assert (low["outages"], low["moves"], low["max_ms"], low["median_ms"]) == (2, 1, 1297.0, 708.5)
    assert low["p99_ms"] == pytest.approx(120.0 + 0.99 * (1297.0 - 120.0))
    brokers = result.frames["by_broker"].set_index("broker")
    assert brokers["outages"].to_dict() == {"(unknown)": 1, "b3": 2, "b1": 2}
    assert brokers["moved_outages"].to_dict() == {"(unknown)": 0, "b3": 0, "b1": 1}
    assert list(result.frames["by_broker"]["broker"]) == ["(unknown)", "b3", "b1"]  # max first
    (hour,) = result.frames["by_hour"].itertuples()
    assert (hour.outages, hour.median_ms, hour.max_ms, hour.lost) == (5, 1297.0, 3000.0, 3)
    assert list(result.frames["worst"]["first_seq"]) == [10, 140, 40, 100, 0]
    assert list(result.frames["worst"]["rank"]) == [1, 2, 3, 4, 5]
    assert result.summary == {
        "outages": 5,
        "measured": 5,
        "worst_outage_ms": 3000.0,
        "median_outage_ms": 1297.0,
        "delayed": 8,
        "lost": 3,
        "probe_messages": 450,
        "probed_bundles": 3,
        "moves": 1,
        "moved_outages": 1,
        "median_slope_ms_per_day": None,  # one day only
    }


def test_hand_outages_are_unload_latencys_own(hand: tuple[Path, Result]) -> None:
    root, result = hand
    first = Store(root).snapshots()["collected_at"].iloc[0].to_pydatetime()
    probes = Store(root).read("probes", since=first).to_pandas()
    own = probe_outages(probes)
    own = own.astype({"cut_at": "datetime64[us, UTC]", "back_at": "datetime64[us, UTC]"})
    pd.testing.assert_frame_equal(result.frames["outages"][OUTAGE_COLUMNS], own, check_dtype=False)


def test_hand_history_equals_pandas(hand: tuple[Path, Result]) -> None:
    root, result = hand
    assert_same(result, pandas_result(root))


def test_hand_views_draw_both_charts_and_the_tables(hand: tuple[Path, Result]) -> None:
    _, result = hand
    views = PLUGIN.render(result)
    assert [type(v) for v in views[:5]] == [Metric] * 5
    assert any(isinstance(v, Note) and v.level == "error" for v in views)  # 3 lost
    charts = [v for v in views if isinstance(v, Chart)]
    assert [c.title for c in charts] == ["Outages per hour", "Worst bundles"]
    for chart in charts:
        assert chart.chart.to_dict()["$schema"]
    titles = {v.title for v in views if isinstance(v, Table)}
    assert titles == {"Per day", "Per broker", "Worst outages", "Every outage", "Per bundle"}


def test_the_stored_result_reads_back_and_draws_its_page(
    hand: tuple[Path, Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, result = hand
    store = Store(root)
    params = runner.validate_params(PLUGIN, None).model_dump(mode="json")
    ids = tuple(str(s) for s in store.snapshots()["snapshot_id"])
    stored = StoredResult(PLUGIN.name, PLUGIN.version, params, ids, "ok", 1.0, result=result)
    ResultStore(root).write(stored)  # as the job worker stores it
    output = runner.run(PLUGIN, store)
    assert output.stored and output.result.summary == result.summary
    for name, frame in result.frames.items():
        back = output.result.frames[name]
        assert list(back.columns) == list(frame.columns) and len(back) == len(frame)
    monkeypatch.setenv("PULSAR_LENS_STORE", str(root))
    page = plugin_page(PLUGIN.name, timeout=60)
    assert not page.exception
    assert [e.value for e in page.error] == ["3 probe message(s) of an outage were never received."]
    assert [t.value for t in page.title] == ["Unload history"]
    assert {m.label: shown(m.value) for m in page.metric}["Worst outage"] == "3,000 ms"
    assert any(len(t) == 5 and "broker" in t.columns for t in (d.value for d in page.dataframe))


def test_an_unacked_run_ends_at_the_next_messages_ack_and_a_trailing_one_never_ends(
    spark: object, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    store.write(make_snapshot(0.0, bundles=[_bundle(NS, LOW, "b1")]))
    # sent 10 ms apart: seq 4 is acked (43 ms) before seq 3 (75 ms), yet seq 3 ends the run
    publish: list[float | None] = [FAST, None, None, 45.0, FAST, FAST, None]
    _write_probes(store, _probe("p", NS, LOW, publish, every=0.01), written=1.0)
    output = _run(store)
    assert_same(output.result, pandas_result(tmp_path))
    outages = output.result.frames["outages"]
    assert list(outages["first_seq"]) == [1, 6]
    assert outages["outage_ms"].iloc[0] == pytest.approx(75.0 - 3.0)
    assert pd.isna(outages["back_at"].iloc[1]) and pd.isna(outages["outage_ms"].iloc[1])
    assert list(output.result.frames["worst"]["first_seq"]) == [1]  # measured ones only
    summary = output.result.summary
    assert (summary["outages"], summary["measured"], summary["lost"]) == (2, 1, 3)


# -- parameters and random histories ---------------------------------------------------------


def test_a_higher_threshold_and_a_shorter_list_agree_too(
    hand: tuple[Path, Result], spark: object
) -> None:
    root, _ = hand
    output = _run(Store(root), slow_ms=150.0, top=2)
    plain = pandas_result(root, slow_ms=150.0, top=2)
    assert_same(output.result, plain)
    assert list(output.result.frames["outages"]["first_seq"]) == [10, 40, 140]
    assert len(output.result.frames["worst"]) == 2


OWNERS = ["b1", "b2", "b3", None]
BUNDLES = [(NS, LOW), (NS, HIGH), (OTHER_NS, LOW), (OTHER_NS, HIGH)]


def random_store(root: Path, *, seed: int, days: int = 4) -> Store:
    """Polls every two hours over `days`; owners move, go unowned, and a bundle is sometimes
    missing from a poll. Probe runs (restarting seq) send every 5 minutes: mostly fast, with
    bursts of slow, unacknowledged, lost and duplicated messages, some runs with none."""
    rng = random.Random(seed)
    store = Store(root)
    owner = {b: rng.choice(OWNERS[:3]) for b in BUNDLES}
    for i in range(days * 12):
        for b in BUNDLES:
            if rng.random() < 0.2:
                owner[b] = rng.choice(OWNERS)
        listed = [_bundle(ns, bounds, owner[(ns, bounds)]) for ns, bounds in BUNDLES]
        polled = [r for r in listed if rng.random() > 0.1]
        store.write(make_snapshot(7200.0 * i, bundles=polled))
    for n, (ns, bounds) in enumerate(BUNDLES[:3]):
        for run in range(2):
            sends = days * 144  # half the window, one send every 5 minutes
            publish: list[float | None] = []
            burst = 0
            for _ in range(sends):
                if burst == 0 and rng.random() < 0.02 * (n + run):
                    burst = rng.randint(1, 5)
                if burst:
                    burst -= 1
                    publish.append(None if rng.random() < 0.3 else rng.uniform(60, 3000) * 1.0)
                else:
                    publish.append(rng.choice([FAST, 4.0, 45.0, 50.0, 55.0]))  # 50: not slow
            received = {s: rng.choice([0, 2, 3]) for s in range(sends) if rng.random() < 0.03}
            start = run * days * 43200.0 + rng.uniform(-600, 600)
            rows = _probe(f"p{n}-{run}", ns, bounds, publish, start=start, every=300.0)
            rows = [replace(r, received=received.get(r.seq, r.received)) for r in rows]
            for part in range(4):  # batches written as their newest message is sent
                batch = rows[part * sends // 4 : (part + 1) * sends // 4]
                _write_probes(store, batch, written=(batch[-1].sent_at - at(0)).total_seconds())
    return store


def test_spark_equals_pandas_on_random_histories(spark: object, tmp_path: Path) -> None:
    random_store(tmp_path, seed=5)
    output = _run(Store(tmp_path))
    plain = pandas_result(tmp_path)
    assert_same(output.result, plain)
    summary, frames = output.result.summary, output.result.frames
    assert summary["outages"] > 40 and 0 < summary["moved_outages"] < summary["outages"]
    assert summary["lost"] > 0 and summary["measured"] <= summary["outages"]
    assert "(unknown)" in set(frames["by_broker"]["broker"])
    assert len(frames["trend"]) >= 4 and summary["median_slope_ms_per_day"] is not None
    assert (frames["by_bundle"]["duplicates"] > 0).all()


# -- how the rows are read, and nothing to show ----------------------------------------------


def test_probe_rows_are_read_by_time_as_the_light_runner_reads_them(
    spark: object, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    for i in range(3):
        store.write(make_snapshot(30.0 * i, bundles=[_bundle(NS, LOW, "b1")]))
    rows = _probe("p", NS, LOW, [FAST] * 9, start=-20.0, every=10.0)
    _write_probes(store, rows[:2], written=-5.0)  # before the first poll: outside the window
    _write_probes(store, rows[2:5], written=45.0)
    _write_probes(store, rows[5:], written=500.0)  # after the newest poll: inside it
    spark_inputs = runner.inputs_for(PLUGIN, store)
    plain = runner.load_inputs(PLUGIN, store).history("probes")
    got = spark_inputs.history("probes").drop("date").toPandas()  # type: ignore[union-attr]
    order = ["probe", "seq"]
    got = got.sort_values(order).reset_index(drop=True)
    for name in got.select_dtypes("datetime64").columns:  # Spark hands back naive UTC times
        got[name] = got[name].dt.tz_localize("UTC")
    assert list(got["seq"]) == list(range(2, 9))
    want = plain.sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_an_empty_store_has_no_outages(spark: object, tmp_path: Path) -> None:
    output = _run(Store(tmp_path))
    assert all(frame.empty for frame in output.result.frames.values())
    assert list(output.result.frames["outages"].columns) == OUTAGES
    assert_same(output.result, pandas_result(tmp_path))


def test_polls_without_probes_say_how_to_probe(spark: object, tmp_path: Path) -> None:
    store = Store(tmp_path)
    for i, owner in enumerate(["b1", "b2", "b1"]):
        store.write(make_snapshot(30.0 * i, bundles=[_bundle(NS, LOW, owner)]))
    output = _run(store)
    assert output.result.summary["moves"] == 2 and output.result.summary["outages"] == 0
    assert_same(output.result, pandas_result(tmp_path))
    notes = [v for v in output.views if isinstance(v, Note)]
    assert len(notes) == 1 and "pulsar-lens collect --probe" in notes[0].markdown
