"""The answers read by `decode_json` (msgspec, colons counted), by the standard library's
`decode_json_tolerant` (the reader before it), and with the broker-stats/topics answer read
into typed Structs (`decode_broker_stats`) make the same snapshot, table for table.

Same bodies through both readers, then the same poll or assembly; every polled table is
compared as the store would build it (Arrow, then pandas: values and dtypes), and the
snapshot's errors line for line. The bodies: the synthetic cluster of the scale harness
(bulk and per-topic answers), every recorded answer of both releases, and each damaged
answer of `test_refusals` (duplicate keys, bytes that are not UTF-8, wrong types, ...).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from benchmarks.bulk_answers import answers_of
from benchmarks.synth_server import SynthCluster
from pulsar_lens.collectors.answers import decode_json, decode_json_tolerant
from pulsar_lens.collectors.assemble import PollAnswers, build_snapshot
from pulsar_lens.collectors.notes import noting
from pulsar_lens.collectors.poll import poll
from pulsar_lens.collectors.typedrecords import parse_bulk
from pulsar_lens.collectors.typedstats import TypedBulk, decode_broker_stats
from pulsar_lens.core.model import POLLED_TABLES, Snapshot, records_to_table
from tests.collectors.test_refusals import CASES, MARK, Case
from tests.props.strategies import DATA, FakeAdmin, index

Decode = Callable[[bytes], Any]
BULK = "/admin/v2/broker-stats/topics"
READERS = {"new": decode_json, "old": decode_json_tolerant, "typed": decode_json}
"""How each path reads every answer but the bulk one."""
BULK_READERS = {**READERS, "typed": decode_broker_stats}
"""... and the bulk one."""
SCENARIOS = sorted(p.name for p in DATA.iterdir() if p.is_dir())
AT = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def assert_same_snapshots(old: Snapshot, new: Snapshot) -> None:
    for name in POLLED_TABLES:
        tables = [
            records_to_table(
                name, s.records(name), snapshot_id="s", collected_at=AT, cluster=s.cluster
            ).to_pandas()
            for s in (old, new)
        ]
        pd.testing.assert_frame_equal(*tables, check_dtype=True, obj=name)
    assert [(e.endpoint, e.status, e.message) for e in old.errors] == [
        (e.endpoint, e.status, e.message) for e in new.errors
    ]


def synthetic(reader: str, cluster: SynthCluster) -> Snapshot:
    return build_snapshot(synthetic_answers(cluster, reader))


def synthetic_answers(cluster: SynthCluster, reader: str = "new") -> PollAnswers:
    """The answers of the synthetic cluster's current poll, read by `reader`'s path."""
    decode, bulk = READERS[reader], BULK_READERS[reader]
    g = cluster.current
    static = {
        "brokers": cluster.brokers,
        "answers": {path: body.decode() for path, body in cluster._static.items()},
    }
    answers = answers_of(static, {b: decode(g.owned[b]) for b in cluster.brokers})
    with noting(answers.notes):
        for b in cluster.brokers:
            answers.bulk[b] = parse_bulk(bulk(g.bulk[b]), b)
    for name in cluster.names[::2]:  # half the topics with their per-topic stats too
        body = cluster.topic_stats(name, g)
        assert body is not None
        answers.topic_stats[name] = decode(body)
    return answers


def test_the_synthetic_cluster_assembles_the_same() -> None:
    cluster = SynthCluster(400, ["127.0.0.1:9001", "127.0.0.1:9002"], change=0.0, seed=3)
    old, new, typed = (synthetic(r, cluster) for r in ("old", "new", "typed"))
    assert len(new.topics) == 400 and new.draining_hashes and new.consumers
    assert_same_snapshots(old, new)
    assert_same_snapshots(old, typed)
    assert all(type(decode_broker_stats(g)) is TypedBulk for g in cluster.current.bulk.values())


def recorded_admin(scenario: str, reader: str) -> FakeAdmin:
    bodies = {}
    for entry in index(scenario):
        name = entry["file"]
        body = (DATA / scenario / name).read_bytes() if name else None
        if body is not None and name.endswith(".json"):
            decode = (BULK_READERS if entry["path"] == BULK else READERS)[reader]
            bodies[(entry["path"], entry["query"])] = decode(body)
        else:
            bodies[(entry["path"], entry["query"])] = body.decode() if body else None
    return FakeAdmin(bodies)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recording_polls_the_same(scenario: str) -> None:
    old, new, typed = (
        poll(recorded_admin(scenario, r), concurrency=1)  # type: ignore[arg-type]
        for r in ("old", "new", "typed")
    )
    assert new.topics and new.consumers
    assert_same_snapshots(old, new)
    assert_same_snapshots(old, typed)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recorded_bulk_answer_is_read_typed(scenario: str) -> None:
    for entry in index(scenario):
        if entry["path"] == BULK and entry["file"]:
            body = (DATA / scenario / entry["file"]).read_bytes()
            assert type(decode_broker_stats(body)) is TypedBulk


def damaged_admin(case: Case, reader: str) -> FakeAdmin:
    """The recorded default cluster, one answer damaged as `case` says (as test_refusals
    damages it), every answer read from bytes by `decode`."""
    bodies = {}
    for entry in index("default"):
        key = (entry["path"], entry["query"])
        name = entry["file"]
        if not name or not name.endswith(".json"):
            bodies[key] = (DATA / "default" / name).read_text() if name else None
            continue
        raw = (DATA / "default" / name).read_bytes()
        if key == case.answer:
            body = json.loads(raw)
            case.edit(body)
            text = json.dumps(body, ensure_ascii=False).encode("utf-8")
            raw = text.replace(json.dumps(MARK)[1:-1].encode(), case.raw)
        bodies[key] = (BULK_READERS if entry["path"] == BULK else READERS)[reader](raw)
    return FakeAdmin(bodies)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_damaged_answer_polls_the_same(case: Case) -> None:
    old, new, typed = (
        poll(damaged_admin(case, r), concurrency=1, timeout=1.0)  # type: ignore[arg-type]
        for r in ("old", "new", "typed")
    )
    assert new.partial
    assert_same_snapshots(old, new)
    assert_same_snapshots(old, typed)
