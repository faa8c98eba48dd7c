"""key-shared-map's chart builders, checked through their Vega-Lite specs."""

from __future__ import annotations

import pandas as pd

from pulsar_lens.plugins.builtin.key_shared_map import charts

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


def test_chart_builders_accept_empty_frames() -> None:
    empty = RANGES.iloc[0:0]
    for chart in (
        charts.chart_hash_band(empty),
        charts.chart_hash_ring(empty),
        charts.chart_share(pd.DataFrame({"consumer_name": [], "share": []})),
    ):
        assert chart.to_dict()
