"""key-distribution models the broker line its snapshots' brokers report: on 3.0.7 brokers
each key counts for the consumer the light 3.0 models of core choose, and the page says so; a
window spanning an upgrade is counted on the newest poll's line and says that too."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.api import Note
from pulsar_lens.core.assignments import Consumer, Selector
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyload import UNCOVERED
from pulsar_lens.core.model import BrokerRecord
from pulsar_lens.core.selectors import make_selector
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.key_distribution import KeyDistribution
from pulsar_lens.plugins.builtin.key_distribution.frames import model_of
from pulsar_lens.plugins.builtin.key_distribution.reference import pandas_result
from tests.spark.test_key_distribution import _consumer, _same, _sample, _sub, _write

pytestmark = pytest.mark.spark

PLUGIN = KeyDistribution()
T = "persistent://public/default/lines"
KEYS = [f"key-{i}" for i in range(120) for _ in range(1 + i % 3)]
PARAMS = {"top_keys": 1000}
STICKY = {"x": ((0, 9999), (20000, 29999)), "y": ((40000, 65535),)}  # x's gap is x's on 3.0


def _model(kind: str, pulsar: PulsarLine) -> tuple[Selector, list[Consumer]]:
    """The light model of core for one subscription, its consumers joined in order."""
    selector = make_selector(kind, pulsar=pulsar)  # type: ignore[arg-type]
    if kind == "sticky":
        handles = [Consumer(name, ranges) for name, ranges in STICKY.items()]
    else:
        handles = [Consumer(name) for name in ("c-one", "c-two", "c-three")]
    for handle in handles:
        selector.add(handle)
    return selector, handles


SUBS = {
    "ch": ("consistent", "AUTO_SPLIT"),
    "as": ("auto-split", "AUTO_SPLIT"),
    "st": ("sticky", "STICKY"),
}


def _poll_tables(pulsar: PulsarLine, version: str, since: int) -> dict[str, Any]:
    """Subscriptions, consumers and brokers of one poll of line `pulsar`, the consumers' ranges
    as a broker of that line lists them (`Selector.ranges`)."""
    subs, consumers = [], []
    for sub, (kind, mode) in SUBS.items():
        selector, handles = _model(kind, pulsar)
        listed = selector.ranges()
        subs.append(_sub(T, sub, len(handles), mode=mode))
        consumers += [
            _consumer(T, sub, h.name, *listed[h], since=since + i) for i, h in enumerate(handles)
        ]
    brokers = [BrokerRecord(f"broker-{i}:8080", version=version) for i in range(2)]
    return {"subscriptions": subs, "consumers": consumers, "brokers": brokers}


def _expected(keys: list[str], pulsar: PulsarLine) -> dict[str, dict[str, str]]:
    """Per subscription label, each key's consumer under the light model of `pulsar`."""
    out = {}
    for sub, (kind, _) in SUBS.items():
        selector, _ = _model(kind, pulsar)
        chosen = {key: selector.select_key(key.encode()) for key in keys}
        out[f"{T} | {sub}"] = {k: c.name if c else UNCOVERED for k, c in chosen.items()}
    return out


def _run(store: Store) -> Any:
    return runner.run(PLUGIN, store, PARAMS, use_cache=False, use_stored=False).result


@pytest.fixture(scope="module")
def store_3_0(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("line-3-0"))
    _write(store, 0.0, [_sample(T, k) for k in KEYS], **_poll_tables("3.0", "3.0.7", 10))
    return store


@pytest.fixture(scope="module")
def result_3_0(spark: object, store_3_0: Store) -> Any:
    return _run(store_3_0)


def test_on_3_0_brokers_each_key_goes_where_the_3_0_model_sends_it(result_3_0: Any) -> None:
    expected = _expected(sorted(set(KEYS)), "3.0")
    hot = result_3_0.frames["hot_keys"]
    for label, by_key in expected.items():
        mine = hot[hot["label"] == label]
        assert dict(zip(mine["key"], mine["consumer_name"], strict=True)) == by_key, label
        counted = Counter(by_key[k] for k in KEYS)
        consumers = result_3_0.frames["consumers"]
        rows = consumers[(consumers["label"] == label) & (consumers["messages"] > 0)]
        assert dict(zip(rows["consumer_name"], rows["messages"], strict=True)) == counted
    # the sticky gap between x's two ranges is x's on 3.0; the one before y's stalls
    assert set(expected[f"{T} | st"].values()) == {"x", "y", UNCOVERED}
    selectors = result_3_0.frames["skew"].set_index("label")["selector"].to_dict()
    assert selectors == {f"{T} | {sub}": kind for sub, (kind, _) in SUBS.items()}


def test_on_3_0_brokers_the_what_if_uses_the_3_0_ring(result_3_0: Any) -> None:
    """At the broker's own consumers and replica points the what-if's ring is the one that
    routed the keys: nothing moves, and its busiest share is the counted one."""
    label = f"{T} | ch"
    row = result_3_0.frames["what_if"].query("label == @label and points == 100 and consumers == 3")
    counted = Counter(_expected(KEYS, "3.0")[label][k] for k in KEYS)
    assert row["moved_share"].tolist() == [0.0]
    assert row["max_share"].tolist() == pytest.approx([max(counted.values()) / len(KEYS)])


def test_on_3_0_brokers_the_result_and_page_say_the_3_0_model(result_3_0: Any) -> None:
    summary = result_3_0.summary
    assert (summary["pulsar"], summary["broker_versions"], summary["lines"]) == (
        "3.0",
        ["3.0.7"],
        ["3.0"],
    )
    assert summary["model"] == "Pulsar 3.0 model (brokers: 3.0.7)"
    notes = [v.markdown for v in PLUGIN.render(result_3_0) if isinstance(v, Note)]
    assert any("Pulsar 3\\.0 model" in n or "Pulsar 3.0 model" in n for n in notes)


def test_on_3_0_brokers_spark_equals_pandas(result_3_0: Any, store_3_0: Store) -> None:
    plain = pandas_result(store_3_0.root, top_keys=1000)
    _same(dict(result_3_0.frames), dict(plain.frames))
    assert result_3_0.summary == plain.summary


def test_an_upgrade_window_is_counted_on_the_newest_line_and_says_so(
    spark: object, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    first, second = KEYS[: len(KEYS) // 2], KEYS[len(KEYS) // 2 :]
    _write(store, 0.0, [_sample(T, k) for k in first], **_poll_tables("3.0", "3.0.7", 10))
    _write(store, 30.0, [_sample(T, k) for k in second], **_poll_tables("4.0", "4.0.7", 40))
    result = _run(store)
    summary = result.summary
    assert (summary["pulsar"], summary["broker_versions"], summary["lines"]) == (
        "4.0",
        ["3.0.7", "4.0.7"],
        ["3.0", "4.0"],
    )
    assert summary["model"].startswith("Pulsar 4.0 model (brokers: 3.0.7, 4.0.7); the window")
    assert "newest poll's 4.0 model" in summary["model"]
    # the newest poll's keys go where the 4.0 model sends them
    label = f"{T} | as"
    hot = result.frames["hot_keys"]
    mine = hot[hot["label"] == label].set_index("key")["consumer_name"]
    expected = _expected(second, "4.0")[label]
    assert {k: mine[k] for k in second} == expected
    plain = pandas_result(store.root, top_keys=1000)
    _same(dict(result.frames), dict(plain.frames))
    assert summary == plain.summary


def test_the_model_line_is_the_newest_reported_one() -> None:
    at = pd.Timestamp("2026-01-01", tz="UTC")
    lines = pd.DataFrame(
        {
            "snapshot_id": ["a", "a", "b", "c"],
            "collected_at": [at, at, at + pd.Timedelta(30, "s"), at + pd.Timedelta(60, "s")],
            "version": ["4.0.7", "4.0.7", "3.0.7", None],  # c: no version reported
        }
    )
    found = model_of(lines)
    assert (found["pulsar"], found["lines"]) == ("3.0", ["3.0", "4.0"])
    assert "window holds polls of 3.0 and 4.0 brokers" in found["model"]
    empty = model_of(lines.iloc[:0])
    assert empty == {
        "pulsar": "4.0",
        "broker_versions": [],
        "lines": ["4.0"],
        "model": "Pulsar 4.0 model (brokers: version unknown)",
    }
