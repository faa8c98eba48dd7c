"""A broker's bulk answer read into typed Structs (`decode_broker_stats`, `parse_bulk`) makes
the same records, field warnings and refusal notes as the tolerant path (`decode_json`,
`parse_broker_topic_stats`), whatever its fields hold: random values of every JSON type
(counts past int64, rates past 1e18, epochs past the year 9999, NaN), fields missing, null
or unknown, keys given twice, unicode and refused names, texts written with escapes (`\\u`
escapes of every character past ASCII, of colons and of lone surrogates, `\\/`, `\\"`,
`\\\\`). A body the typed reading would not
read exactly takes the tolerant path; `read_typed` counts how many did not (`event`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import responses
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.answers import decode_json
from pulsar_lens.collectors.bulkparts import BrokerPart, collect_broker_part, part_of_payload
from pulsar_lens.collectors.fields import field_warnings, reading
from pulsar_lens.collectors.notes import Notes
from pulsar_lens.collectors.topics import parse_broker_topic_stats
from pulsar_lens.collectors.typedrecords import (
    backlog_of,
    needs_details,
    parse_bulk,
    subscription_rows,
    subscriptions_of,
    topic_of,
    topic_row,
)
from pulsar_lens.collectors.typedstats import TypedBulk, decode_broker_stats
from pulsar_lens.core.model import row_of
from pulsar_lens.core.topicname import parse_topic_name

TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'), max_size=6
)
ANY = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | TEXT
    | st.lists(st.integers(-3, 70_000), max_size=3)
    | st.dictionaries(TEXT, st.integers(0, 9), max_size=2)
)
BOUNDS = [2**63 - 1, 2**63, -(2**63) - 1, 10**20, 253_402_300_799_999, 253_402_300_800_000]
EDGES = st.sampled_from([*BOUNDS, 1e18, -1e18, 1e300, 3.0, -0.0, float("nan"), float("inf")])
"""Values at and past the bounds of a column."""
INTS = st.integers(-5, 10**6)
EPOCHS = st.integers(-5, 2 * 10**12)
FLOATS = st.floats(-1e6, 1e6) | st.integers(-5, 5)
TIMES = (
    st.sampled_from(
        ["2026-11-20T10:00:00.123456789Z", "2026-11-20T10:00:00+01:00", "0001-01-01T00:00+01:00"]
    )
    | TEXT
)
KINDS: dict[str, st.SearchStrategy[Any]] = {
    "int": INTS,
    "epoch": EPOCHS,
    "float": FLOATS,
    "bool": st.booleans(),
    "text": TEXT,
    "time": TIMES,
    "type": st.sampled_from(["Shared", "Failover", "Key_Shared", "Exclusive", "None"]) | TEXT,
    "ranges": st.lists(st.lists(st.integers(-2, 70_000), min_size=1, max_size=3), max_size=3),
    "texts": st.lists(st.sampled_from(["[0, 5]", "[9, 2]", "[x]"]) | TEXT, max_size=3),
    "draining": st.lists(
        st.fixed_dictionaries({"hash": INTS}, optional={"unackMsgs": INTS}) | ANY, max_size=3
    ),
    "json": st.dictionaries(TEXT, TEXT, max_size=2),
    "unread": ANY,
}
CONSUMER = {
    "consumerName": "text",
    "address": "text",
    "connectedSince": "time",
    "clientVersion": "text",
    "unackedMessages": "int",
    "blockedConsumerOnUnackedMsgs": "bool",
    "availablePermits": "int",
    "msgRateOut": "float",
    "messageAckRate": "float",
    "keyHashRangeArrays": "ranges",
    "keyHashRanges": "texts",
    "drainingHashes": "draining",
    "drainingHashesCount": "int",
    "readPositionWhenJoining": "text",
    "lastSentPositionWhenJoining": "text",
    "lastAckedTimestamp": "epoch",
    "lastConsumedTimestamp": "epoch",
    "metadata": "unread",
    "msgThroughputOut": "unread",
}
SUBSCRIPTION = {
    "type": "type",
    "msgBacklog": "int",
    "backlogSize": "int",
    "msgRateOut": "float",
    "messageAckRate": "float",
    "blockedSubscriptionOnUnackedMsgs": "bool",
    "activeConsumerName": "text",
    "isDurable": "bool",
    "durable": "bool",
    "lastConsumedTimestamp": "epoch",
    "earliestMsgPublishTimeInBacklog": "epoch",
    "consumersAfterMarkDeletePosition": "json",
    "msgRateExpired": "unread",
}
TOPIC = {
    "producerCount": "int",
    "msgRateIn": "float",
    "msgThroughputOut": "float",
    "storageSize": "int",
    "backlogSize": "int",
    "replication": "unread",
    "averageMsgSize": "unread",
}


@st.composite
def objects(draw: st.DrawFn, fields: dict[str, str], odd: int) -> dict[str, Any]:
    """Some of `fields`, each with a value of its kind; in one of `odd` (when not 0) of any
    kind, null or at a bound, and beside a field Pulsar does not write here."""
    found = {}
    for key in draw(st.lists(st.sampled_from(sorted(fields)), unique=True)):
        strange = odd and draw(st.integers(1, odd)) == 1
        found[key] = draw(ANY | EDGES if strange else KINDS[fields[key]])
    if odd and draw(st.integers(1, 2 * odd)) == 1:
        found[draw(TEXT)] = draw(ANY)
    return found


@st.composite
def topics(draw: st.DrawFn, odd: int) -> dict[str, Any]:
    stats = draw(objects(TOPIC, odd))
    if draw(st.booleans()):
        stats["publishers"] = draw(st.lists(objects({"connectedSince": "time"}, odd), max_size=2))
    subs = {}
    for name in draw(st.lists(TEXT, max_size=3, unique=True)):
        sub = draw(objects(SUBSCRIPTION, odd))
        if draw(st.booleans()):
            sub["consumers"] = draw(st.lists(objects(CONSUMER, odd), max_size=3))
        subs[name] = sub
    if subs or draw(st.booleans()):
        stats["subscriptions"] = subs
    return stats


@st.composite
def bulk_bodies(draw: st.DrawFn) -> bytes:
    local = st.sampled_from(["t", "é-ü", "a:b", "日本", "t-partition-1", "..", *ODD_NAMES]) | TEXT
    names = draw(st.lists(local, min_size=1, max_size=3, unique=True))
    ns = draw(st.sampled_from(["public/default", "other/ns"]))
    odd = draw(st.sampled_from([0, 0, 10, 40]))  # half the bodies hold nothing odd
    listed = {f"persistent://public/default/{n}": draw(topics(odd)) for n in names}
    body = {ns: {"0x00000000_0xffffffff": {"persistent": listed}}}
    text = json.dumps(body, ensure_ascii=draw(st.integers(0, 4)) == 0)
    text = escaped(text, draw(st.sampled_from(["", "", ":", "/", ":/"])))
    if draw(st.integers(0, 9)) == 0:  # a key given twice, in an object (not in a text)
        texts = [found.span() for found in _STRING.finditer(text)]
        opens = [
            i
            for i in range(len(text))
            if text.startswith('{"', i) and not any(a <= i < b for a, b in texts)
        ]
        if opens:
            at = opens[draw(st.integers(0, len(opens) - 1))]
            text = text[:at] + '{"msgBacklog":7,' + text[at + 1 :]
    return text.encode("utf-8", "surrogatepass")


ODD_NAMES = ['q"t', "b\\s", "x\\u003ay", "c\x01", "s\ud800", "p:ü:\u2028"]
"""Names whose JSON needs an escape, or spells one."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ESCAPES = {":": "\\u003a", "/": "\\/"}


def escaped(text: str, chars: str) -> str:
    """`text` (JSON) with each of `chars` inside its texts written as an escape instead (no
    escape sequence holds a colon or a slash, so none is broken)."""
    if not chars:
        return text

    def within(found: re.Match[str]) -> str:
        string = found.group()
        for char in chars:
            string = string.replace(char, _ESCAPES[char])
        return string

    return _STRING.sub(within, text)


def read(
    body: bytes,
    decode: Callable[[bytes], Any],
    parse: Callable[..., Any],
    *,
    as_parts_do: bool = False,
) -> Any:
    """What the records of `body` are and what was said reading them; `as_parts_do`: the
    rows made as a broker's part makes them, tuples of the records' fields."""
    notes = Notes()
    with field_warnings(notes) as found:
        rows: list[Any] = []
        for entry in parse(decode(body), "127.0.0.1:8080"):
            name = parse_topic_name(entry.topic)
            with reading(entry.topic):
                if as_parts_do:
                    rows.append(topic_row(name, entry.stats, bundle=entry.bundle, owner="b"))
                    rows.append(fields_of(subscription_rows(entry.topic, entry.stats)))
                else:
                    rows.append(topic_of(name, entry.stats, bundle=entry.bundle, owner="b"))
                    rows.append(subscriptions_of(entry.topic, entry.stats))
                rows.append((backlog_of(entry.stats), needs_details(entry.stats)))
    return rows, list(found), notes.lines()


def as_rows(read_records: Any) -> Any:
    """What `read` found, each record as the tuple of its fields (as parts make them); `read`
    gives three items a topic: its record, its subscription records, its backlog readings."""
    records, found, lines = read_records
    each = (
        row_of,
        lambda subs: tuple(tuple(map(row_of, rs)) for rs in fields_of(subs)),
        lambda readings: readings,
    )
    return [each[i % 3](r) for i, r in enumerate(records)], found, lines


def fields_of(found: Any) -> tuple[Any, ...]:
    """A dataclass's fields as they are (`dataclasses.astuple` copies them deeply)."""
    return tuple(getattr(found, f.name) for f in dataclasses.fields(found))


@settings(max_examples=300, deadline=None)
@given(bulk_bodies())
def test_typed_bulk_reads_as_the_tolerant_path(body: bytes) -> None:
    typed = type(decode_broker_stats(body)) is TypedBulk
    event(("read typed" if typed else "tolerant path") + (", escapes" if b"\\" in body else ""))
    tolerant = read(body, decode_json, parse_broker_topic_stats)
    assert read(body, decode_broker_stats, parse_bulk) == tolerant
    for decode, parse in (
        (decode_broker_stats, parse_bulk),
        (decode_json, parse_broker_topic_stats),
    ):
        assert read(body, decode, parse, as_parts_do=True) == as_rows(tolerant)


PLAIN = json.dumps(
    {
        "public/default": {
            "0x00000000_0xffffffff": {
                "persistent": {
                    "persistent://public/default/t": {
                        "msgRateIn": 1,
                        "subscriptions": {"s": {"type": "Shared", "consumers": [{}]}},
                    }
                }
            }
        }
    }
).encode()


def test_a_plain_bulk_answer_is_read_typed() -> None:
    raw = PLAIN
    assert type(decode_broker_stats(raw)) is TypedBulk
    assert read(raw, decode_broker_stats, parse_bulk) == read(
        raw, decode_json, parse_broker_topic_stats
    )
    for odd in (b'"msgRateIn":null', b'"msgRateIn":1,"msgRateIn":2', b'"msgRateIn":"1"'):
        assert type(decode_broker_stats(raw.replace(b'"msgRateIn": 1', odd))) is not TypedBulk


@pytest.mark.parametrize(
    ("body", "typed"),
    [(PLAIN, True), (PLAIN.replace(b'"msgRateIn": 1', b'"msgRateIn": true'), False)],
)
def test_the_collector_asks_for_the_typed_reading(body: bytes, typed: bool) -> None:
    """`collect_broker_part` builds the answer read through a real AdminClient (typed, or
    when that would not read it exactly as every answer is read) into the part that the
    tolerant reading makes."""
    url = "http://broker-1:8080"
    with responses.RequestsMock() as mock:
        mock.get(f"{url}/admin/v2/broker-stats/topics", body=body)
        client = AdminClient("http://broker-0:8080", backoff=0.0)
        part = collect_broker_part(client, url, "broker-1:8080", None, timeout=5.0)
    assert (type(decode_broker_stats(body)) is TypedBulk) is typed
    tolerant = part_of_payload(decode_json(body), "broker-1:8080", None)
    assert isinstance(tolerant, BrokerPart) and part.index.equals(tolerant.index)
    assert all(part.tables[n].equals(t) for n, t in tolerant.tables.items())
    assert part.tables["topics"].num_rows > 0


def test_a_bulk_answer_with_escapes_is_read_typed() -> None:
    """Pulsar writes a name past ASCII as `\\u` escapes: such a body is still read typed,
    and what escaping hides (a colon, a key given twice) is still counted."""
    body = json.loads(PLAIN)
    (listed,) = body["public/default"].values()
    listed["persistent"]["persistent://public/default/日本:é"] = {"subscriptions": {"s/é": {}}}
    text = escaped(json.dumps(body), ":/")
    assert "\\u003a" in text and "\\u65e5" in text
    for raw in (text.encode(), json.dumps(body, ensure_ascii=False).encode()):
        assert type(decode_broker_stats(raw)) is TypedBulk
        assert read(raw, decode_broker_stats, parse_bulk) == read(
            raw, decode_json, parse_broker_topic_stats
        )
    twice = text.replace('{"msgRateIn"', '{"msgBacklog": 7, "msgBacklog": 8, "msgRateIn"')
    for raw in (
        twice.encode(),  # an escaped colon more and a colon fewer: the counts still differ
        text.replace("\\u65e5", "\\ud800").encode(),  # a lone surrogate
        text.replace("s\\/\\u00e9", "x\\\\u003ay").encode(),  # spells an escaped colon
    ):
        assert type(decode_broker_stats(raw)) is not TypedBulk
        assert read(raw, decode_broker_stats, parse_bulk) == read(
            raw, decode_json, parse_broker_topic_stats
        )
