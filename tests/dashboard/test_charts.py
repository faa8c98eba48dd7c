"""Chart builders, checked through their Vega-Lite specs."""

from __future__ import annotations

import pandas as pd

from dashboard import charts

RANGES = pd.DataFrame(
    {
        "consumer_name": ["c1", "c2", "c1"],
        "start": [1, 2960, 5969],
        "end": [2959, 5968, 65535],
    }
)
DRAINING = pd.DataFrame(
    {"consumer_name": ["c1"], "hash": [2862], "unack_msgs": [2], "blocked_attempts": [5]}
)


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def _data(spec: dict, layer: dict) -> list[dict]:
    name = (layer.get("data") or spec["data"])["name"]
    return spec["datasets"][name]


def test_chart_hash_band_spans_the_whole_hash_space() -> None:
    spec = charts.chart_hash_band(RANGES).to_dict()
    band = _layers(spec)[0]
    assert band["mark"]["type"] == "bar"
    assert band["encoding"]["x"]["scale"]["domain"] == [0, 65536]
    assert band["encoding"]["x2"]["field"] == "stop"
    rows = _data(spec, band)
    assert [r["stop"] for r in rows] == [2960, 5969, 65536]
    assert [r["width"] for r in rows] == [2959, 3009, 59567]


def test_chart_hash_band_marks_draining_hashes() -> None:
    spec = charts.chart_hash_band(RANGES, DRAINING).to_dict()
    rules = _layers(spec)[1]
    assert rules["mark"]["type"] == "rule"
    assert rules["mark"]["color"] == charts.DRAINING_COLOR
    assert [r["hash"] for r in _data(spec, rules)] == [2862]


def test_chart_hash_band_without_draining_has_one_layer() -> None:
    spec = charts.chart_hash_band(RANGES, DRAINING.iloc[0:0]).to_dict()
    assert len(_layers(spec)) == 1


def test_chart_hash_ring_maps_hashes_to_a_full_turn_with_draining_ticks() -> None:
    spec = charts.chart_hash_ring(RANGES, DRAINING).to_dict()
    ring, dots = _layers(spec)
    assert ring["mark"]["type"] == "arc"
    scale = ring["encoding"]["theta"]["scale"]
    assert scale["domain"] == [0, 65536]
    assert abs(scale["range"][1] - 6.283185307179586) < 1e-9
    assert dots["mark"]["type"] == "arc"
    assert dots["mark"]["color"] == charts.DRAINING_COLOR
    tick = _data(spec, dots)[0]
    assert (tick["from_hash"], tick["to_hash"]) == (2862 - 150, 2862 + 150)


def test_chart_share_draws_the_fair_share() -> None:
    shares = pd.DataFrame({"consumer_name": ["a", "b", "c", "d"], "share": [0.4, 0.3, 0.2, 0.1]})
    spec = charts.chart_share(shares).to_dict()
    bars, rule = _layers(spec)
    assert bars["encoding"]["x"]["axis"]["format"] == "%"
    assert _data(spec, rule) == [{"fair": 0.25}]


def test_chart_what_if_orders_lanes() -> None:
    rows = pd.DataFrame(
        {
            "lane": ["now", "what-if", "moves"],
            "consumer_name": ["a", "b", "b"],
            "start": [1, 1, 1],
            "end": [65535, 65535, 65535],
        }
    )
    spec = charts.chart_what_if(rows).to_dict()
    assert spec["encoding"]["y"]["sort"] == ["now", "what-if", "moves"]


def test_chart_failover_heatmap_colours_active_cells() -> None:
    frame = pd.DataFrame(
        {
            "partition": [0, 0, 1, 1],
            "consumer_name": ["a", "b", "a", "b"],
            "active": [True, False, False, True],
        }
    )
    spec = charts.chart_failover_heatmap(frame).to_dict()
    assert spec["mark"]["type"] == "rect"
    assert spec["encoding"]["x"]["field"] == "partition"
    assert spec["encoding"]["color"]["scale"]["range"][0] == "#1f77b4"


def test_with_spans_ends_each_poll_at_the_next_one() -> None:
    t = pd.to_datetime(["2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"])
    frame = pd.DataFrame({"collected_at": list(t) * 2, "bundle_key": ["x"] * 3 + ["y"] * 3})
    spans = charts.with_spans(frame, time="collected_at", lane="bundle_key")
    x = spans[spans["bundle_key"] == "x"]
    assert list(x["until"]) == [t[1], t[2], t[2] + pd.Timedelta(seconds=10)]


def test_chart_ownership_shows_unowned_bundles_and_events() -> None:
    t = pd.to_datetime(["2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"])
    own = pd.DataFrame(
        {"collected_at": t, "bundle_key": ["p/d/0x0_0x4"] * 2, "owner_broker": ["b1:8080", None]}
    )
    events = pd.DataFrame(
        {
            "at": [t[1]],
            "kind": ["bundle_owner_changed"],
            "subject": ["p/d/0x0_0x4"],
            "before": ["b1:8080"],
            "after": [None],
        }
    )
    spec = charts.chart_ownership(own, events).to_dict()
    lanes, rules = _layers(spec)
    owners = [r["owner"] for r in _data(spec, lanes)]
    assert owners == ["b1:8080", charts.UNOWNED]
    assert rules["mark"]["type"] == "rule"


def test_chart_builders_accept_empty_frames() -> None:
    empty = RANGES.iloc[0:0]
    for chart in (
        charts.chart_hash_band(empty),
        charts.chart_hash_ring(empty),
        charts.chart_share(pd.DataFrame({"consumer_name": [], "share": []})),
        charts.chart_bar(pd.DataFrame({"k": [], "v": []}), label="k", value="v"),
    ):
        assert chart.to_dict()


def test_chart_series_colours_by_group() -> None:
    frame = pd.DataFrame(
        {"collected_at": pd.to_datetime(["2026-01-01T00:00:00Z"]), "lag": [3.0], "sub": ["s"]}
    )
    spec = charts.chart_series(frame, x="collected_at", y="lag", color="sub").to_dict()
    assert spec["encoding"]["color"]["field"] == "sub"
    assert spec["mark"]["type"] == "line"


def test_chart_ownership_greys_out_unowned_bundles() -> None:
    t = pd.to_datetime(["2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"])
    own = pd.DataFrame(
        {"collected_at": t, "bundle_key": ["p/d/0x0_0x4"] * 2, "owner_broker": ["b2", None]}
    )
    scale = charts.chart_ownership(own).to_dict()["layer"][0]["encoding"]["color"]["scale"]
    assert scale["domain"] == ["b2", charts.UNOWNED]
    assert scale["range"][-1] == charts.UNOWNED_COLOR
