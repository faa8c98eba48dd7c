"""A results pass reads each table window once for the plugins that declare it
(`plugins.sharedreads`), each plugin still getting frames of its own, with the results the
pass gave when each plugin read on its own."""

from __future__ import annotations

import datetime as dt
import shutil
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa

from benchmarks.synth_store import generate
from pulsar_lens.api import AnalysisPlugin, Inputs, Metric, Result
from pulsar_lens.core.clusterview import ClusterView
from pulsar_lens.core.model import ConsumerRecord, SubscriptionRecord, TopicRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.precompute import compute_results, requirements_first, store_run
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import ResultStore
from pulsar_lens.plugins.sharedreads import SharedReads, cut
from pulsar_lens.plugins.testing import make_snapshot
from pulsar_lens.plugins.window import read_key
from tests.plugins.same_results import assert_same_results

TOPICS = [f"persistent://public/default/t{i}" for i in range(4)]


class CountingStore(Store):
    """A store counting its table reads by table name."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: Counter[str] = Counter()
        self.columns: dict[str, tuple[str, ...] | None] = {}  # of each table's last read

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        self.reads[name] += 1
        self.columns[name] = None if columns is None else tuple(columns)
        return super().read(
            name, snapshot_ids=snapshot_ids, since=since, until=until, columns=columns
        )


def polled_store(root: Path, polls: int = 3) -> CountingStore:
    store = CountingStore(root)
    for i in range(polls):
        store.write(
            make_snapshot(
                30.0 * i,
                topics=[TopicRecord(t, "public", "public/default", msg_rate_in=i) for t in TOPICS],
                subscriptions=[SubscriptionRecord(t, "s", type="Key_Shared") for t in TOPICS],
                consumers=[
                    ConsumerRecord(t, "s", f"c{i}", hash_ranges=((0, 100), (200, 300)))
                    for t in TOPICS
                ],
            )
        )
    store.reads.clear()
    return store


class Seen(AnalysisPlugin):
    """Keeps a copy of the frames it was given."""

    name = "seen"
    title = "Seen"
    description = "Keeps what it read."
    version = "1.0"
    inputs = ("topics", "consumers")
    outputs = ("rows",)
    history = 3
    seen: ClassVar[list[dict[str, pd.DataFrame]]] = []

    def analyze(self, data: Inputs, params: object) -> Result:
        type(self).seen.append({n: f.copy(deep=True) for n, f in data.tables.items()})
        rows = pd.DataFrame(
            {"table": list(data.tables), "rows": [len(f) for f in data.tables.values()]}
        )
        return Result(frames={"rows": rows}, summary={"topics": len(data.tables["topics"])})

    def render(self, result: Result) -> list[Any]:
        return [Metric("Topics", result.summary["topics"])]


class Mutating(Seen):
    """Changes its frames every way a plugin can: columns, values, order, nested values."""

    name = "mutating"

    def analyze(self, data: Inputs, params: object) -> Result:
        topics, consumers = data.tables["topics"], data.tables["consumers"]
        topics["topic"] = "changed"
        topics.loc[topics.index[0], "msg_rate_in"] = -1.0
        topics["added"] = 1
        consumers["hash_ranges"].iloc[0][0]["start"] = -5  # a dict inside an object array
        del consumers["consumer_name"]
        data.tables["topics"] = topics.iloc[:1]
        return super().analyze(data, params)


class Newest(Seen):
    """The same table over its newest poll only: another read."""

    name = "newest"
    history_of: ClassVar[dict[str, int]] = {"topics": 1}


def unshared(store: Store, name: str, polls: int) -> pd.DataFrame:
    ids = list(store.snapshots(limit=polls)["snapshot_id"])
    return Store(store.root).read(name, snapshot_ids=ids).to_pandas()


def test_two_plugins_declaring_a_window_read_it_once_and_each_gets_its_own_frames(
    tmp_path: Path,
) -> None:
    store = polled_store(tmp_path)
    Seen.seen = []
    results = ResultStore(tmp_path)
    outcomes = compute_results(store, [Mutating(), Seen(), Newest()], results=results)
    assert [o.status for o in outcomes] == ["ok", "ok", "ok"]
    # topics over 3 polls once for mutating and seen, the newest cut from it for newest;
    # consumers over 3 polls once for all three
    assert store.reads == Counter({"topics": 1, "consumers": 1})
    mutated, seen, newest = Seen.seen
    assert set(mutated["topics"]["topic"]) == {"changed"}  # it did change its own
    for name in ("topics", "consumers"):
        pd.testing.assert_frame_equal(seen[name], unshared(store, name, 3))
    pd.testing.assert_frame_equal(newest["topics"], unshared(store, "topics", 1))
    assert newest["consumers"]["hash_ranges"].iloc[0][0] == {"start": 0, "end": 100}


def test_a_drop_in_plugin_shares_the_read_and_receives_only_what_it_declared(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "declared.py").write_text(textwrap.dedent(DROP_IN))
    registry = discover(entry_points=False, plugin_dirs=[folder])
    assert registry.failures == []
    declared = registry.get("declared-only")
    assert declared.isolated
    store = polled_store(tmp_path / "store")
    Seen.seen = []
    outcomes = compute_results(store, [declared, Seen()], results=ResultStore(store.root))
    assert [(o.plugin, o.status, o.error) for o in outcomes] == [
        ("declared-only", "ok", None),
        ("seen", "ok", None),
    ]
    assert store.reads == Counter({"topics": 1, "consumers": 1})
    runner.clear_cache()
    summary = runner.run(declared, store).result.summary  # the stored result
    assert summary == {"tables": ["topics"], "rows": 12}
    pd.testing.assert_frame_equal(Seen.seen[0]["topics"], unshared(store, "topics", 3))


DROP_IN = """
from pulsar_lens.api import AnalysisPlugin, Metric, Result


class DeclaredOnly(AnalysisPlugin):
    name = "declared-only"
    title = "Declared only"
    description = "Says which tables it was given, and changes them."
    version = "1.0"
    inputs = ("topics",)
    outputs = ("names",)
    history = 3
    api_version = 1

    def analyze(self, data, params):
        topics = data.tables["topics"]
        rows = len(topics)
        topics["topic"] = "changed in the worker"
        names = topics[["topic"]].reset_index(drop=True)
        summary = {"tables": sorted(data.tables), "rows": rows}
        return Result(frames={"names": names}, summary=summary)

    def render(self, result):
        return [Metric("Rows", result.summary["rows"])]


PLUGINS = (DeclaredOnly,)
"""


def test_the_pass_stores_what_each_plugin_stored_reading_on_its_own(tmp_path: Path) -> None:
    """Every built-in on a synthetic cluster (every table the collector writes): the shared
    pass and the pass of before (each plugin reading through the pinned view) store equal
    results."""
    generate(tmp_path / "shared", topics=200, days=4 * 30 / 86400)
    shutil.copytree(tmp_path / "shared", tmp_path / "alone")
    plugins = list(discover(entry_points=False))
    shared = CountingStore(tmp_path / "shared")
    compute_results(shared, plugins, results=ResultStore(shared.root))
    alone = CountingStore(tmp_path / "alone")
    pinned = ClusterView(alone, None).pinned()
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]
    for plugin in light:
        store_run(pinned, plugin, ResultStore(alone.root))
    assert sum(shared.reads.values()) < sum(alone.reads.values())
    assert shared.reads["consumers"] < alone.reads["consumers"]
    assert_same_results(light, shared.root, alone.root, alone)


class Tables:
    """A SnapshotStore of fixed tables, counting reads."""

    def __init__(self, **tables: pa.Table) -> None:
        self.tables = tables
        self.reads: list[str] = []
        self.windows: list[Sequence[str] | None] = []
        self.asked: list[list[str] | None] = []  # the columns of each read (None: all)

    def snapshots(self, *, limit: int | None = None) -> pd.DataFrame:
        return pd.DataFrame()

    def read(
        self,
        name: str,
        *,
        snapshot_ids: Sequence[str] | None = None,
        since: dt.datetime | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        self.reads.append(name)
        self.windows.append(snapshot_ids)
        self.asked.append(None if columns is None else list(columns))
        return self.tables[name]


def test_a_table_is_kept_only_while_a_later_plugin_declares_it() -> None:
    big = pa.table({"x": pa.array(range(1000), pa.int64())})
    store = Tables(a=pa.table({"x": [1]}), b=pa.table({"x": [2]}), big=big)
    a, b, huge = (read_key(n, snapshot_ids=["s1"]) for n in ("a", "b", "big"))
    shared = SharedReads(store, [{a, b, huge}, {a}, {b, huge}, set()], max_bytes=100)
    shared.advance()  # the first plugin
    for name in ("a", "b", "big"):
        shared.read(name, snapshot_ids=["s1"])
    assert shared.read("a", snapshot_ids=["s2"]) is store.tables["a"]  # another window
    assert set(shared._kept) == {a, b}  # big is beyond max_bytes: read again when wanted
    shared.advance()  # the second: the last to want a
    shared.read("a", snapshot_ids=["s1"])
    assert set(shared._kept) == {b}  # handed to its last reader, then dropped
    shared.advance()  # the third
    shared.read("b", snapshot_ids=["s1"])
    shared.read("big", snapshot_ids=["s1"])
    assert store.reads == ["a", "b", "big", "a", "big"]
    assert (shared.reads, shared.shared, shared._kept) == (5, 2, {})
    shared.close()


def test_what_a_plugin_declared_and_did_not_read_is_dropped_when_the_next_starts() -> None:
    store = Tables(a=pa.table({"x": [1]}))
    a = read_key("a", snapshot_ids=["s1"])
    shared = SharedReads(store, [{a}, {a}, set()])
    shared.advance()
    shared.read("a", snapshot_ids=["s1"])
    shared.advance()  # its result was stored already: it reads nothing
    assert set(shared._kept) == {a}
    shared.advance()
    assert shared._kept == {}
    shared.read("a", snapshot_ids=["s1"])
    shared.close()
    assert store.reads == ["a", "a"] and shared._kept == {}


def test_a_window_inside_a_kept_longer_one_is_cut_from_it() -> None:
    rows = pa.table({"snapshot_id": ["s1", "s2", "s2", "s3"], "x": [1, 2, 3, 4]})
    store = Tables(t=rows)
    every, newest, two = (
        read_key("t", snapshot_ids=ids) for ids in (["s1", "s2", "s3"], ["s3"], ["s2", "s3"])
    )
    shared = SharedReads(store, [{every}, {newest}, {two}, {newest}, set()])
    shared.advance()
    assert shared.read("t", snapshot_ids=["s1", "s2", "s3"]) is rows
    shared.advance()
    assert shared.read("t", snapshot_ids=["s3"]).to_pydict() == {"snapshot_id": ["s3"], "x": [4]}
    shared.advance()
    cut_two = shared.read("t", snapshot_ids=["s2", "s3"])
    assert cut_two.to_pydict() == {"snapshot_id": ["s2", "s2", "s3"], "x": [2, 3, 4]}
    assert set(shared._kept) == {every}  # a window inside it is still to come
    shared.advance()
    shared.read("t", snapshot_ids=["s3"])
    assert shared._kept == {}  # its last reader
    assert (store.reads, shared.reads, shared.shared, shared.cut) == (["t"], 1, 0, 3)


def test_a_longer_window_is_never_read_for_a_shorter_one() -> None:
    store = Tables(t=pa.table({"snapshot_id": ["s1", "s2"], "x": [1, 2]}))
    every, newest = (read_key("t", snapshot_ids=ids) for ids in (["s1", "s2"], ["s2"]))
    shared = SharedReads(store, [{newest}, {every}])
    shared.advance()
    shared.read("t", snapshot_ids=["s2"])  # on its own: the longer one is not kept yet
    shared.advance()
    shared.read("t", snapshot_ids=["s1", "s2"])
    assert store.windows == [["s2"], ["s1", "s2"]]
    assert (shared.reads, shared.shared, shared.cut) == (2, 0, 0)


def test_a_cut_window_is_what_the_store_reads_for_it(tmp_path: Path) -> None:
    """Through the pinned view of a store whose days hold compacted and single-poll files:
    every window of the newest polls, and others, cut from the longest, equal their reads."""
    generate(tmp_path, topics=30, days=6 * 30 / 86400)
    store = Store(tmp_path)
    days = {d for f in store.live_files("consumers") for d in [f.first.date()]}
    store.compact(min(days))
    polls = len(store.snapshots())
    for i in range(polls, polls + 3):
        store.write(make_snapshot(1e6 + 30.0 * i, consumers=[ConsumerRecord(TOPICS[0], "s", "c")]))
    view = ClusterView(store, None).pinned()
    ids = [str(s) for s in view.snapshots()["snapshot_id"]]
    for name in ("consumers", "subscriptions"):
        longest = view.read(name, snapshot_ids=ids)
        windows = [ids[-n:] for n in range(1, len(ids))] + [ids[1:3], ids[::2]]
        for window in windows:
            direct = view.read(name, snapshot_ids=window)
            assert cut(longest, read_key(name, snapshot_ids=window)).equals(direct), window


class Narrow(Seen):
    """Reads two columns of consumers."""

    name = "narrow"
    columns_of: ClassVar[dict[str, tuple[str, ...]]] = {"consumers": ("topic", "consumer_name")}


class OtherNarrow(Seen):
    """Reads another column of consumers, and the newest poll of topics only."""

    name = "other-narrow"
    columns_of: ClassVar[dict[str, tuple[str, ...]]] = {"consumers": ("hash_ranges",)}
    history_of: ClassVar[dict[str, int]] = {"topics": 1}


def test_plugins_naming_their_columns_share_one_read_of_their_columns_together(
    tmp_path: Path,
) -> None:
    store = polled_store(tmp_path)
    Seen.seen = []
    outcomes = compute_results(store, [Narrow(), OtherNarrow()], results=ResultStore(tmp_path))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert store.reads == Counter({"topics": 1, "consumers": 1})
    asked = store.columns["consumers"]
    assert asked is not None and set(asked) == {"topic", "consumer_name", "hash_ranges"}
    assert store.columns["topics"] is None  # neither names columns of topics
    narrow, other = Seen.seen  # each got its own columns of the shared read, and only those
    full = unshared(store, "consumers", 3)
    keep = ["snapshot_id", "collected_at"]
    pd.testing.assert_frame_equal(narrow["consumers"], full[[*keep, "topic", "consumer_name"]])
    pd.testing.assert_frame_equal(other["consumers"], full[[*keep, "hash_ranges"]])
    pd.testing.assert_frame_equal(other["topics"], unshared(store, "topics", 1))


def test_a_shared_read_is_of_every_column_when_one_of_its_plugins_names_none(
    tmp_path: Path,
) -> None:
    store = polled_store(tmp_path)
    Seen.seen = []
    compute_results(store, [Narrow(), Seen()], results=ResultStore(tmp_path))
    assert store.reads["consumers"] == 1
    assert store.columns["consumers"] is None
    narrow, seen = Seen.seen
    handed = list(narrow["consumers"].columns)
    assert handed == ["snapshot_id", "collected_at", "topic", "consumer_name"]
    pd.testing.assert_frame_equal(seen["consumers"], unshared(store, "consumers", 3))


def test_a_read_is_cut_from_a_longer_one_only_when_that_one_reads_its_columns() -> None:
    """Widening a long window by a shorter read's columns would read them over each of its
    polls: the shorter read is read on its own then, and shared by its own readers."""
    table = pa.table({"snapshot_id": ["a", "b"], "x": [1, 2], "y": [3, 4]})
    store = Tables(t=table)
    every = read_key("t", snapshot_ids=["a", "b"])
    newest = read_key("t", snapshot_ids=["b"])
    x, y = frozenset({"x"}), frozenset({"y"})
    shared = SharedReads(store, [{every: x}, {newest: y}, {newest: x}, {newest: x}])
    shared.advance()
    shared.read("t", snapshot_ids=["a", "b"], columns=["x"])
    assert store.asked == [["x"]]  # not widened by the newest poll's y
    shared.advance()
    shared.read("t", snapshot_ids=["b"], columns=["y"])
    assert store.asked == [["x"], ["x", "y"]]  # on its own, with its readers' columns
    shared.advance()
    shared.advance()
    shared.read("t", snapshot_ids=["b"], columns=["x"])
    assert (shared.reads, shared.shared, shared.cut) == (2, 1, 0)

    plain = SharedReads(Tables(t=table), [{every: x}, {newest: x}])
    plain.advance()
    plain.read("t", snapshot_ids=["a", "b"], columns=["x"])
    plain.advance()
    assert plain.read("t", snapshot_ids=["b"], columns=["x"]).to_pylist() == [
        {"snapshot_id": "b", "x": 2, "y": 4}
    ]
    assert (plain.reads, plain.cut) == (1, 1)  # the longer read has x: cut from it


def test_a_read_nobody_planned_reads_the_columns_asked_for() -> None:
    store = Tables(t=pa.table({"x": [1]}))
    shared = SharedReads(store, [set()])
    shared.advance()
    shared.read("t", snapshot_ids=["a"], columns=["x"])
    shared.read("t", snapshot_ids=["a"])
    assert store.asked == [["x"], None]


def test_a_kept_read_lacking_a_column_asked_for_is_read_again_with_it() -> None:
    """A read nobody planned (a step's polls) that a kept table answers, exactly or cut from
    a longer one, but whose planned readers did not name a column it asks for: read from the
    store with its own columns, the kept table left to its readers."""
    table = pa.table({"snapshot_id": ["a", "b"], "x": [1, 2], "y": [3, 4]})
    store = Tables(t=table)
    every = read_key("t", snapshot_ids=["a", "b"])
    x = frozenset({"x"})
    shared = SharedReads(store, [{every: x}, {every: x}])
    shared.advance()
    shared.read("t", snapshot_ids=["a", "b"], columns=["x"])
    shared.read("t", snapshot_ids=["a", "b"], columns=["x", "y"])  # y: not in the kept read
    shared.read("t", snapshot_ids=["a", "b"])  # every column: neither
    assert store.asked == [["x"], ["x", "y"], None]
    shared.advance()
    shared.read("t", snapshot_ids=["a", "b"], columns=["x"])  # its planned reader: kept
    assert (shared.reads, shared.shared) == (3, 1)
