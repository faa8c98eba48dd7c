"""Our topic-name parser and bundle placement against the broker's own classes, on thousands
of generated names: odd cases, charsets, every shape the broker accepts or refuses. Each test
runs on every release of `ORACLE_RELEASES` and checks the model of that release's line
(`parse_topic_name(..., pulsar="3.0")` against 3.0.7's `TopicName`)."""

from __future__ import annotations

import random

import pytest

from pulsar_lens.core.bundles import default_boundaries, find_bundle, topic_bundle_hash
from pulsar_lens.core.topicname import (
    TopicNameError,
    TopicNameLine,
    parse_topic_name,
    topic_name_line,
)
from tests.jvm.conftest import Answer, Oracle

PIECES = [
    "public",
    "default",
    "orders",
    "t",
    "ns",
    "x",
    "a b",
    "ä",
    "ß",
    "日本",
    "ſ",
    "ı",
    "İ",
    "K",
    "%20",
    "a.b",
    "a=b",
    "a:b",
    "-",
    "_",
    "",
    " ",
    "/",
    "//",
    "\t",
    "é",
    "😀",
    "-partition-",
    "-partition-3",
    "-partition-03",
    "-partition--1",
    "-partition-+1",
    "-partition-٣",
    "-partition-2147483648",
    "-partition-2147483647",
    "cluster",
    "__change_events",
]
DOMAINS = [
    "persistent://",
    "non-persistent://",
    "PERSISTENT://",
    "Persistent://",
    "NON-PERSISTENT://",
    "perſiſtent://",
    "foo://",
    "://",
    "",
    "persistent:/",
    "persistent:///",
]


VALID = ["public", "default", "orders", "t", "ns", "x", "a.b", "a=b", "a:b", "-", "_", "c1"]


def generated(count: int, seed: int) -> list[str]:
    """Names from valid pieces with odd ones mixed in: about half are names the broker takes."""
    rng = random.Random(seed)
    names = []
    for _ in range(count):
        odd = rng.random() < 0.5
        pool = PIECES if odd else VALID
        parts = [
            rng.choice(pool) + rng.choice(["", "", rng.choice(pool)])
            for _ in range(rng.choice([1, 3, 3, 3, 4, 5]))
        ]
        if not odd and rng.random() < 0.5:
            parts[-1] += rng.choice(PIECES)  # the local name may hold anything
        names.append(rng.choice(DOMAINS if odd else [*DOMAINS[:5], ""]) + "/".join(parts))
    return names


KNOWN = [
    "PERSISTENT://public/default/x",
    "persistent://public/default/x",
    "x",
    "public/default/x",
    "foo://public/default/x",
    "persistent://public/default/",
    "persistent://public/default/x/",
    "persistent://pub lic/default/x",
    "persistent://public/def ault/x",
    "persistent://public/default/with space",
    "persistent://t/cluster/ns/x",
    "persistent://t/cluster/ns/x/y/z",
    "persistent://public/default/orders-partition-3",
    "persistent://public/default/orders-partition-03",
    "non-persistent://public/default/日本",
    "a//b/c",
    "/a/b/c",
    "",
    "persistent://public/default/x-partition-\U0001d7d9",  # a digit outside the BMP
    "persistent://public/default/x-partition-\u0663",  # a digit inside it
]


def line(oracle: Oracle) -> TopicNameLine:
    """How the product reads topic names for this oracle's release."""
    return topic_name_line(oracle.version)


def ours(name: str, bundles: int, pulsar: TopicNameLine = "4.0") -> Answer:
    try:
        parsed = parse_topic_name(name, pulsar=pulsar)
    except TopicNameError as exc:
        return Answer(error=f"IllegalArgumentException: {exc}")
    bundle = find_bundle(default_boundaries(bundles), topic_bundle_hash(parsed.topic))
    return Answer(
        parsed.topic,
        parsed.partition_index,
        parsed.namespace,
        parsed.local,
        f"0x{bundle.lower:08x}_0x{bundle.upper:08x}",
    )


def compare(oracle: Oracle, names: list[str], bundles: int) -> list[str]:
    found = []
    for name, theirs in zip(names, oracle.ask(names, bundles=bundles), strict=True):
        mine = ours(name, bundles, line(oracle))
        if (mine.error is None) != (theirs.error is None) or (
            mine.error is None and mine != theirs
        ):
            found.append(f"{name!r}: Pulsar {oracle.version} {theirs}, our {line(oracle)} {mine}")
    return found


def test_known_odd_names_read_as_the_broker_reads_them(oracle: Oracle) -> None:
    assert compare(oracle, KNOWN, 4) == []


@pytest.mark.parametrize(("seed", "bundles"), [(1, 4), (2, 16), (3, 128), (4, 1)])
def test_generated_names_agree_with_the_broker(oracle: Oracle, seed: int, bundles: int) -> None:
    names = generated(2500, seed)
    assert sum(1 for a in oracle.ask(names[:200], bundles=bundles) if a.error is None) > 20
    assert compare(oracle, names, bundles) == []


def test_refusals_carry_the_brokers_message(oracle: Oracle) -> None:
    names = [
        "foo://public/default/x",
        "persistent://public/default/",
        "a/b",
        "persistent://p ub/ns/x",
    ]
    for name, theirs in zip(names, oracle.ask(names), strict=True):
        assert ours(name, 4, line(oracle)).error == theirs.error, oracle.version


def test_whitespace_local_names_are_read_like_the_broker(oracle: Oracle) -> None:
    """4.0 refuses a whitespace-only local name; 3.0 takes it (and only an empty one not)."""
    names = [
        f"persistent://public/default/{w}"
        for w in (" ", "\t", "\u3000", "\u00a0", "\u0085", "\u2007")
    ]
    for name, theirs in zip(names, oracle.ask(names), strict=True):
        assert ours(name, 4, line(oracle)) == theirs, f"{name!r} on Pulsar {oracle.version}"
        if name[-1] in " \t\u3000":  # Java whitespace (the no-break spaces are not)
            assert (theirs.error is None) is (line(oracle) == "3.0"), name


def test_lone_surrogates_are_refused_though_the_class_would_take_them() -> None:
    with pytest.raises(TopicNameError, match="is not valid text"):
        parse_topic_name("persistent://public/default/x\udcff")
