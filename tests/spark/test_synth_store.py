"""The benchmark's synthetic store reads as any store: through `pulsar_lens.core.store.Store` and
`plugins.spark.reader`, with its index's row counts, the events the collector's diff would
record, and a store grown day by day equal to one written at once."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from benchmarks.synth_store import TABLES, generate, link_days
from pulsar_lens.collectors.events import diff
from pulsar_lens.core.model import RECORD_TYPES, Snapshot
from pulsar_lens.core.store import Store

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def hour(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An hour of a 1,000-topic cluster polled every 30 s."""
    root = tmp_path_factory.mktemp("synth") / "store"
    generate(root, topics=1000, days=1 / 24, interval=30.0)
    return root


def test_rows_match_the_index_and_the_newest_poll_is_found(hour: Path) -> None:
    store = Store(hour)
    index = store.snapshots()
    assert len(index) == 120
    counted: Counter[str] = Counter()
    for counts in index["row_counts_json"]:
        counted.update(json.loads(counts))
    for name in TABLES:
        assert store.read(name).num_rows == counted.get(name, 0), name
    newest = store.read_latest("subscriptions")
    assert newest.num_rows == 1000
    assert set(newest["type"].to_pylist()) == {"Exclusive", "Shared", "Failover", "Key_Shared"}
    key_shared = store.read_latest("consumers").to_pandas()
    ranges = key_shared[key_shared["hash_ranges"].map(len) > 0]
    assert len(ranges) and ranges["hash_ranges"].map(len).eq(1).all()


def test_events_are_what_the_collector_diff_records(hour: Path) -> None:
    store = Store(hour)
    index = store.snapshots()
    tables = {n: store.read(n) for n in ("bundles", "subscriptions", "consumers")}
    snapshots = [
        _snapshot(tables, sid, at)
        for sid, at in zip(index["snapshot_id"], index["collected_at"], strict=True)
    ]
    expected = sorted(
        _key(e) for before, after in itertools.pairwise(snapshots) for e in diff(before, after)
    )
    stored = sorted(_key(e) for e in _records("events", store.read("events")))
    kinds = {k for k, *_ in stored}
    assert {"active_consumer_changed", "consumer_left", "consumer_joined"} <= kinds
    assert stored == expected


def _snapshot(tables: dict[str, pa.Table], sid: str, at: Any) -> Snapshot:
    rows: dict[str, Any] = {
        name: tuple(_records(name, t.filter(pc.equal(t["snapshot_id"], sid))))
        for name, t in tables.items()
    }
    return Snapshot(cluster="synthetic", collected_at=at.to_pydatetime(), **rows)


def _records(name: str, table: pa.Table) -> list[Any]:
    kind = RECORD_TYPES[name]
    fields = [f.name for f in dataclasses.fields(kind)]
    out = []
    for row in table.select(fields).to_pylist():
        if "hash_ranges" in row:
            row["hash_ranges"] = tuple((r["start"], r["end"]) for r in row["hash_ranges"] or ())
        out.append(kind(**row))
    return out


def _key(event: Any) -> tuple[Any, ...]:
    return (event.kind, event.subject, str(event.before), str(event.after), event.at)


def test_a_store_grown_a_day_at_a_time_equals_one_written_at_once(tmp_path: Path) -> None:
    grown, whole = tmp_path / "grown", tmp_path / "whole"
    generate(grown, topics=200, days=1, interval=600.0)
    generate(grown, topics=200, days=2, interval=600.0)
    generate(whole, topics=200, days=2, interval=600.0)
    first = link_days(whole, tmp_path / "first", 1)
    assert first["polls"] == 144 and first["days"] == 1
    for name in (*TABLES, "snapshots"):
        assert Store(grown).read(name).equals(Store(whole).read(name)), name
    one_day = Store(tmp_path / "first").read("topics")
    assert one_day.equals(Store(whole).read("topics").slice(0, one_day.num_rows))


def test_spark_reads_the_same_rows(spark: Any, hour: Path) -> None:
    from pyspark.sql import functions as F

    from pulsar_lens.plugins.spark import reader

    store = Store(hour)
    for name in ("topics", "consumers", "events"):
        frame = reader.read(spark, hour, name)
        assert frame.count() == store.read(name).num_rows, name
    consumers: Any = reader.read(spark, hour, "consumers")
    ranges = consumers.agg(F.sum(F.size("hash_ranges"))).first()[0]
    expected = pc.sum(pc.list_value_length(store.read("consumers")["hash_ranges"])).as_py()
    assert ranges == expected
