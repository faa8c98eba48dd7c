"""The assembly files, names and places a poll's topics by column (`assemble.Filed`,
`_topic_names`, `_listed`, `_placements`, `_rows_here`); it makes the snapshot the record by
record assembly before it made (`reference_assemble`), table for table and error for error,
on the synthetic cluster's answers and on answers that reach its rarer paths: a broker's bulk
answer missing (its topics only listed), a broker's owned bundles unknown, a filed topic
listed by its short name, names a listing cannot hold (short, of another
namespace, not UTF-8, a `..` segment, not a name), a topic listed twice, a bundle listing
failed, the tenant listing incomplete, partition counts (of a refused parent too), no
listings, no bulk answer at all."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import pytest

from benchmarks.synth_server import SynthCluster
from pulsar_lens.collectors.assemble import PollAnswers, build_snapshot
from tests.collectors.reference_assemble import reference_snapshot
from tests.collectors.test_decode_paths import assert_same_snapshots, synthetic_answers

CLUSTER = SynthCluster(
    300, ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"], change=0.0, seed=5
)
ODD = [
    "orders",
    "persistent://{other}/elsewhere",
    "persistent://{ns}/bad\udc80name",
    "persistent://{ns}/..",
    "persistent://{ns}/listed-only",
    "persistent://{ns}/listed-only",
    "not a topic name!!",
    "",
]


def _as_is(a: PollAnswers) -> None:
    pass


def _broker_missing(a: PollAnswers) -> None:
    a.bulk[a.broker_ids[1]] = None
    ns = sorted(a.listings)
    listing = a.listings[ns[0]]
    odd = [n.format(ns=ns[0], other=ns[1]) for n in ODD]
    twice = (a.listings[ns[2]].topics or ())[0]  # listed by its namespace and by another
    short = twice.removeprefix("persistent://")  # a filed topic's name in its short form
    a.listings[ns[2]] = dataclasses.replace(
        a.listings[ns[2]], topics=(*(a.listings[ns[2]].topics or ()), short)
    )
    a.owned[a.broker_ids[0]] = None  # its bundles' owner unknown: the filer stands in
    a.listings[ns[0]] = dataclasses.replace(listing, topics=(*(listing.topics or ()), *odd))
    a.listings[ns[3]] = dataclasses.replace(
        a.listings[ns[3]], topics=(*(a.listings[ns[3]].topics or ()), twice)
    )


def _listings_failed(a: PollAnswers) -> None:
    ns = sorted(a.listings)
    a.listings[ns[1]] = dataclasses.replace(a.listings[ns[1]], bundles=None, boundaries=None)
    a.namespaces_complete = False
    a.namespaces = tuple(n for n in a.namespaces if n != ns[-1])
    parent = (a.listings[ns[2]].topics or ())[0].rsplit("-partition-", 1)[0]
    a.partition_counts = {
        f"persistent://{ns[2]}/parted": 3,
        parent: 2,
        "persistent://x/y/..": 2,
        f"persistent://{ns[0]}/p\udc80": 1,
    }


def _no_listings(a: PollAnswers) -> None:
    a.listings = {}


def _no_bulk(a: PollAnswers) -> None:
    a.bulk = {b: None for b in a.bulk}


@pytest.mark.parametrize(
    "change", [_as_is, _broker_missing, _listings_failed, _no_listings, _no_bulk]
)
def test_columns_assemble_as_records_did(change: Callable[[PollAnswers], None]) -> None:
    answers = synthetic_answers(CLUSTER)
    change(answers)
    new = build_snapshot(copy.deepcopy(answers))
    assert_same_snapshots(reference_snapshot(copy.deepcopy(answers)), new)
    assert new.topics or change is _no_bulk
