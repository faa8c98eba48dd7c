"""Nothing an answer holds vanishes silently: every name field and every list or object field
of the topic, subscription and consumer answers, damaged in each way an answer can be
damaged, is refused or cut by name, the snapshot is partial, and the valid rest is kept.

The answers are the recorded 4.0.7 ones, damaged as JSON text (so duplicate keys and bytes
that are not UTF-8 are possible) and read by the collector's own `decode_json`, then polled.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pulsar_lens.collectors.answers import decode_json
from pulsar_lens.collectors.fields import MAX_HASH_ITEMS, MAX_TEXT
from pulsar_lens.collectors.notes import CUT, REFUSED
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.model import Snapshot
from tests.props.strategies import FakeAdmin, index, recorded_body

BULK = ("/admin/v2/broker-stats/topics", "")
PKS = ("/admin/v2/persistent/public/default/payments-partition-0/stats", "")
LISTING = ("/admin/v2/persistent/public/default", "includeSystemTopic=true")
LEADER = ("/admin/v2/brokers/leaderBroker", "")
ORDERS = "persistent://public/default/orders"
AUDIT = "persistent://public/second/audit"
MARK = "\x01mark\x01"  # stands for what JSON cannot write: replaced in the answer's bytes
ODD = "odd-one"
TOO_LONG = "n" * (MAX_TEXT + 1)

Edit = Callable[[Any], None]


@dataclass(frozen=True)
class Case:
    id: str
    answer: tuple[str, str]
    edit: Edit
    expect: str  # the start of the line saying what was refused or cut
    raw: bytes = b""  # what MARK becomes in the answer's bytes
    action: str = REFUSED


def bulk_topics(payload: Any) -> dict[str, Any]:
    return payload["public/default"]["0x80000000_0xc0000000"]["persistent"]  # type: ignore[no-any-return]


def pks(payload: Any) -> dict[str, Any]:
    return payload["subscriptions"]["pks"]  # type: ignore[no-any-return]


def consumer(payload: Any) -> dict[str, Any]:
    return pks(payload)["consumers"][0]  # type: ignore[no-any-return]


def put(get: Callable[[Any], dict[str, Any]], key: str, value: Any) -> Edit:
    return lambda payload: get(payload).__setitem__(key, value)


def rename(get: Callable[[Any], dict[str, Any]], old: str, new: str) -> Edit:
    def edit(payload: Any) -> None:
        mapping = get(payload)
        mapping[new] = mapping.pop(old)

    return edit


def twice(get: Callable[[Any], dict[str, Any]], last: Any) -> Edit:
    """A key written twice, the last time with `last`: the marker key added here becomes
    the key (the case's `raw`) in the answer's bytes."""
    return put(get, MARK, last)


def texts(items: list[Any]) -> Edit:
    """3.0's range texts in place of 4.0's arrays."""

    def edit(payload: Any) -> None:
        del consumer(payload)["keyHashRangeArrays"]
        consumer(payload)["keyHashRanges"] = items

    return edit


def shapes(
    id_: str,
    answer: tuple[str, str],
    get: Callable[[Any], dict[str, Any]],
    key: str,
    kinds: dict[str, Any],
    expect: str,
) -> list[Case]:
    return [Case(f"{id_}-{k}", answer, put(get, key, v), expect) for k, v in kinds.items()]


NOT_OBJECT = {"null": None, "string": "x", "list": [], "number": 5}
NOT_LIST = {"null": None, "string": "x", "object": {"a": 1}}
ITEM_SHAPES = {"string": "abc", "number": 7, "one": [1], "three": [1, 2, 3], "object": {"start": 1}}


def _bulk_level(level: str) -> Edit:
    def edit(payload: Any) -> None:
        if level == "namespace":
            payload["public/default"] = "x"
        elif level == "bundle":
            payload["public/default"]["0x80000000_0xc0000000"] = None
        else:
            payload["public/default"]["0x80000000_0xc0000000"]["persistent"] = []

    return edit


CASES: list[Case] = [
    # --- names: the bulk answer's topic, the listing's topic, subscription, consumer ---
    Case(
        "topic-dotdot",
        BULK,
        rename(bulk_topics, ORDERS, "persistent://public/default/.."),
        "topic: has a . or .. segment",
    ),
    Case(
        "topic-other-tenant",
        BULK,
        rename(bulk_topics, ORDERS, "persistent://other/ns/orders"),
        "topic: is listed under another namespace",
    ),
    Case(
        "topic-refused-name",
        BULK,
        rename(bulk_topics, ORDERS, "persistent://too/short"),
        "topic: is a name the broker would refuse",
    ),
    Case(
        "topic-too-long",
        BULK,
        rename(bulk_topics, ORDERS, f"{ORDERS}-{TOO_LONG}"),
        f"topic: is longer than {MAX_TEXT:,}",
    ),
    Case(
        "topic-not-utf8",
        BULK,
        rename(bulk_topics, ORDERS, f"{ORDERS}{MARK}"),
        "topic: is not valid UTF-8 text",
        raw=b"\xff\xfe",
    ),
    Case(
        "topic-twice",
        BULK,
        twice(bulk_topics, "a string"),
        "broker-stats/topics topic: holds a key twice",
        raw=ORDERS.encode(),
    ),
    Case(
        "listing-dotdot",
        LISTING,
        lambda p: p.append("persistent://public/default/."),
        "topic: has a . or .. segment",
    ),
    Case(
        "listing-other-tenant",
        LISTING,
        lambda p: p.append("persistent://other/ns/t"),
        "topic: is listed in another namespace",
    ),
    Case(  # a topic a broker files, listed by a namespace it is not in
        "listing-filed-elsewhere",
        LISTING,
        lambda p: p.append(AUDIT),
        "topic: is listed in another namespace",
    ),
    Case(
        "listing-not-utf8",
        LISTING,
        lambda p: p.append(f"persistent://public/default/{MARK}"),
        "topic: is not valid UTF-8 text",
        raw=b"\xc3(",
    ),
    Case(
        "listing-not-text",
        LISTING,
        lambda p: p.append({"name": "t"}),
        "topic listing item: is an object",
    ),
    Case(
        "subscription-too-long",
        PKS,
        rename(lambda p: p["subscriptions"], "pks", TOO_LONG),
        "subscription: has a name longer than",
    ),
    Case(
        "subscription-twice",
        PKS,
        twice(lambda p: p["subscriptions"], {"type": "Shared"}),
        "topic subscriptions: holds a key twice",
        raw=b"pfo",
    ),
    Case(
        "consumer-name-too-long",
        PKS,
        put(consumer, "consumerName", TOO_LONG),
        "consumerName: is longer than",
        action=CUT,
    ),
    Case(
        "consumer-key-twice",
        PKS,
        twice(consumer, "other"),
        "consumer: holds a key twice",
        raw=b"consumerName",
    ),
    # --- objects and lists that are not ---
    *[
        Case(f"bulk-{lv}", BULK, _bulk_level(lv), f"broker-stats/topics {lv}: is")
        for lv in ("namespace", "bundle", "domain")
    ],
    *shapes(
        "topic-stats",
        BULK,
        bulk_topics,
        ORDERS,
        {"string": "x", "list": [], "null": None},
        "topic: has stats that are",
    ),
    *shapes(
        "subscriptions", PKS, lambda p: p, "subscriptions", NOT_OBJECT, "topic subscriptions: is"
    ),
    *shapes(
        "publishers",
        BULK,
        lambda p: bulk_topics(p)[ORDERS],
        "publishers",
        NOT_LIST,
        "topic publishers: is",
    ),
    *shapes(
        "subscription", PKS, lambda p: p["subscriptions"], "pks", NOT_OBJECT, "subscription: is"
    ),
    *shapes("consumers", PKS, pks, "consumers", NOT_LIST, "subscription consumers: is"),
    Case(
        "consumer-string", PKS, lambda p: pks(p)["consumers"].append("c"), "consumer: is a string"
    ),
    *shapes(
        "ranges", PKS, consumer, "keyHashRangeArrays", NOT_LIST, "consumer keyHashRangeArrays: is"
    ),
    *shapes(
        "ranges-flat",
        PKS,
        consumer,
        "keyHashRangeArrays",
        {"flat": [1, 65535]},
        "consumer keyHashRangeArrays item: is not [start, end]",
    ),
    *[
        Case(
            f"range-item-{k}",
            PKS,
            put(consumer, "keyHashRangeArrays", [v]),
            "consumer keyHashRangeArrays item: is not [start, end]",
        )
        for k, v in ITEM_SHAPES.items()
    ],
    *[
        Case(f"range-text-{k}", PKS, texts([v]), "consumer keyHashRanges item: is not a text")
        for k, v in ITEM_SHAPES.items()
    ],
    *shapes(
        "range-texts",
        PKS,
        consumer,
        "keyHashRangeArrays",
        {"object": {"a": 1}},
        "consumer keyHashRangeArrays: is",
    ),
    *shapes("draining", PKS, consumer, "drainingHashes", NOT_LIST, "consumer drainingHashes: is"),
    *[
        Case(
            f"draining-item-{k}",
            PKS,
            put(consumer, "drainingHashes", [v]),
            "consumer drainingHashes item: is not an object",
        )
        for k, v in ITEM_SHAPES.items()
    ],
    # --- lengths past Pulsar's own bounds ---
    Case(
        "ranges-huge",
        PKS,
        put(consumer, "keyHashRangeArrays", [[i, i] for i in range(MAX_HASH_ITEMS + 5)]),
        f"consumer keyHashRangeArrays: has more than {MAX_HASH_ITEMS:,}",
        action=CUT,
    ),
    Case(
        "draining-huge",
        PKS,
        put(consumer, "drainingHashes", [{"hash": 7}] * (MAX_HASH_ITEMS + 5)),
        f"consumer drainingHashes: has more than {MAX_HASH_ITEMS:,}",
        action=CUT,
    ),
]


def answers_with(case: Case) -> FakeAdmin:
    """The recorded default cluster, one answer damaged as `case` says and read as bytes."""
    bodies = {}
    for entry in index("default"):
        key = (entry["path"], entry["query"])
        body = recorded_body("default", entry)
        if key == case.answer:
            case.edit(body)
            text = json.dumps(body, ensure_ascii=False).encode("utf-8")
            body = decode_json(text.replace(json.dumps(MARK)[1:-1].encode(), case.raw))
        bodies[key] = body
    return FakeAdmin(bodies)


def polled(case: Case) -> Snapshot:
    return poll(answers_with(case), concurrency=1, timeout=1.0)  # type: ignore[arg-type]


@functools.cache
def baseline() -> Snapshot:
    return poll(FakeAdmin.recorded("default"), concurrency=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_damaged_answer_is_refused_by_name_and_the_rest_kept(case: Case) -> None:
    snap = polled(case)
    assert snap.partial
    said = [e.message for e in snap.errors if e.endpoint == case.action]
    assert any(m.startswith(case.expect) for m in said), (case.expect, said, snap.errors)
    # the rest of the cluster is still there: the other namespace, its topic and consumers
    assert AUDIT in {t.topic for t in snap.topics}
    assert {(s.topic, s.subscription) for s in baseline().subscriptions if s.topic == AUDIT} <= {
        (s.topic, s.subscription) for s in snap.subscriptions
    }
    assert len(snap.topics) >= len(baseline().topics) - 1


def test_the_recorded_answers_refuse_and_cut_nothing() -> None:
    """The baseline: nothing Pulsar really sends is refused or cut."""
    assert [e for e in baseline().errors if e.endpoint in (REFUSED, CUT)] == []


def test_many_bad_items_make_one_counted_line_naming_the_first() -> None:
    """Each kind is one line with its count and the first names, not a line per item."""
    case = Case("many", PKS, put(consumer, "keyHashRangeArrays", ["x"] * 60_000), "")
    snap = polled(case)
    (line,) = [e.message for e in snap.errors if "keyHashRangeArrays item" in e.message]
    assert "60,000 time(s)" in line
    first = "'persistent://public/default/payments-partition-0' 'pks' 'pks-1' 'x'"
    assert line.count(first) == 3  # the first three examples, no more


def test_a_cut_consumer_name_stays_one_name_per_consumer() -> None:
    """Two long names sharing their start stay two consumers after the cut."""

    def two_long(payload: Any) -> None:
        consumer(payload)["consumerName"] = "a" * MAX_TEXT + "1"
        pks(payload)["consumers"].append({"consumerName": "a" * MAX_TEXT + "2"})

    snap = polled(Case("two", PKS, two_long, ""))
    names = {c.consumer_name for c in snap.consumers if c.subscription == "pks"}
    assert len(names) >= 2 and all(len(n) <= MAX_TEXT for n in names)


def test_a_leader_answer_naming_no_leader_is_a_failed_call() -> None:
    for body in (None, {}, {"serviceUrl": ""}):
        bodies = FakeAdmin.recorded("default").bodies
        bodies[LEADER] = body
        snap = poll(FakeAdmin(bodies), concurrency=1)  # type: ignore[arg-type]
        (error,) = [e for e in snap.errors if e.endpoint.endswith("/leaderBroker")]
        assert "naming the leader" in error.message


def test_a_null_bulk_answer_is_a_failed_call_for_that_broker() -> None:
    bodies = FakeAdmin.recorded("default").bodies
    bodies[BULK] = None
    snap = poll(FakeAdmin(bodies), concurrency=1)  # type: ignore[arg-type]
    assert any(e.endpoint.endswith("broker-stats/topics") for e in snap.errors)
    assert AUDIT in {t.topic for t in snap.topics}  # the listings still name the topics
