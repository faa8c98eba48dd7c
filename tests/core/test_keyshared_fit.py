"""key-shared-map's bulk path: ring points hashed in blocks, many subscriptions fitted at once."""

from __future__ import annotations

import numpy as np

from pulsar_lens.core.keyshared.fit import fit_consistent
from pulsar_lens.core.keyshared.layout import Layout, from_members
from pulsar_lens.core.keyshared.points import hash_points, prefix_of
from pulsar_lens.core.keyshared.ranges import Member
from pulsar_lens.core.selectors import ConsistentHashingSelector, Consumer


def ring(points: int, names: list[str]) -> list[Member]:
    selector = ConsistentHashingSelector(points=points)
    for name in names:
        selector.add(Consumer(name))
    return [Member(c.name, r) for c, r in selector.ranges().items()]


def joined(subscriptions: list[list[Member]]) -> Layout:
    parts = [from_members(members) for members in subscriptions]
    consumers = np.cumsum([0, *(len(p.names) for p in parts)])
    ranges = np.cumsum([0, *(len(p.starts) for p in parts)])
    return Layout(
        first=consumers.astype(np.int64),
        names=[n for p in parts for n in p.names],
        since=[t for p in parts for t in p.since],
        range_first=np.concatenate(
            [[0], *(p.range_first[1:] + ranges[i] for i, p in enumerate(parts))]
        ).astype(np.int64),
        starts=np.concatenate([p.starts for p in parts]),
        ends=np.concatenate([p.ends for p in parts]),
    )


def test_key_shared_points_match_the_selector_point_hashes() -> None:
    pairs = [("app-1", 0), ("é-日本", 3), ("x", 12), ("a" * 40, 0)]
    for width in (7, 128, 1050):
        hashed = hash_points([prefix_of(name, index) for name, index in pairs], width)
        selector = ConsistentHashingSelector(points=width)
        for row, (name, index) in zip(hashed, pairs, strict=True):
            assert row.tolist() == selector.point_hashes(Consumer(name), index)


def test_key_shared_fit_many_subscriptions_reproduce_their_rings() -> None:
    subscriptions = [
        ring(100, ["a", "b", "c"]),
        ring(9, ["c1", "c2"]),
        ring(200, [f"w{i}" for i in range(10)]),
        ring(700, ["p", "q", "r", "s"]),
        ring(20, ["dup", "dup", "solo", "dup"]),
    ]
    layout = joined(subscriptions)
    fit = fit_consistent(layout, np.arange(len(subscriptions), dtype=np.int64))
    assert fit.drift == [0] * len(subscriptions)
    assert fit.points[1:4] == [9, 200, 700]
    assert fit.indexes[4] == (0, 1, 0, 2)
    for k, members in enumerate(subscriptions):
        rows = fit.model_sub == k
        got = sorted(
            zip(fit.model_owner[rows].tolist(), fit.model_start[rows].tolist(), strict=True)
        )
        assert got == sorted((p, s) for p, m in enumerate(members) for s, _ in m.ranges)


def test_key_shared_fit_flags_a_subscription_no_candidate_reproduces() -> None:
    good = ring(100, ["a", "b"])
    bad = [Member(good[0].name, good[1].ranges), Member(good[1].name, good[0].ranges)]
    fit = fit_consistent(joined([good, bad]), np.arange(2, dtype=np.int64))
    assert fit.drift[0] == 0 and fit.drift[1] > 0
    assert "reproduces" in fit.reasons[1] and not fit.reasons[0]


def test_layout_members_of_many_equal_members_one_at_a_time() -> None:
    """`members_of` (all the chosen at once) gives what `members` gives for each: any order,
    repeats, subscriptions without consumers, consumers without ranges."""
    rng = np.random.default_rng(7)
    subscriptions = [
        [
            Member(f"c{s}-{c}", tuple((int(a), int(a) + 3) for a in rng.integers(0, 99, n)), s)
            for c, n in enumerate(rng.integers(0, 4, rng.integers(0, 5)))
        ]
        for s in range(40)
    ]
    layout = joined(subscriptions)
    for chosen in ([], [3], list(range(40)), [9, 2, 9, 0], rng.integers(0, 40, 60).tolist()):
        assert layout.members_of(chosen) == [layout.members(s) for s in chosen]
    assert [layout.members(s) for s in range(40)] == [
        [Member(m.name, tuple(sorted(m.ranges)), m.connected_since) for m in members]
        for members in subscriptions
    ]


def test_layout_from_frame_places_each_consumer_as_a_lookup_by_key_does() -> None:
    """`from_frame` finds each consumer's subscription with one join; a dictionary lookup per
    row is the reference: keys listed twice (the last place), consumers of subscriptions not
    listed, keys no consumer has, missing names, and text past ASCII."""
    import pandas as pd

    from pulsar_lens.core.keyshared.layout import from_frame

    rng = np.random.default_rng(7)
    topics = [f"persistent://t/n/{w}" for w in ("a", "b", "ü-ß", "c", "日本")]
    subs = ["s1", "s2", "sub 3", "ключ"]
    for _ in range(60):
        keys = [
            (topics[rng.integers(len(topics))], subs[rng.integers(len(subs))])
            for _ in range(int(rng.integers(0, 12)))
        ]
        n = int(rng.integers(0, 40))
        consumers = pd.DataFrame(
            {
                "topic": pd.array(
                    [topics[i] for i in rng.integers(len(topics), size=n)], dtype="str"
                ),
                "subscription": pd.array(
                    [
                        subs[i] if i < len(subs) else None
                        for i in rng.integers(len(subs) + 1, size=n)
                    ],
                    dtype="str",
                ),
                "consumer_name": pd.array([f"c{i}" for i in range(n)], dtype="str"),
                "connected_since": pd.to_datetime(
                    rng.integers(0, 5, size=n) * 1_000_000_000, utc=True
                ),
                "hash_ranges": [[] for _ in range(n)],
            }
        )
        where = {key: s for s, key in enumerate(keys)}
        expected: list[list[str]] = [[] for _ in keys]
        for row in consumers.itertuples():
            s = where.get((row.topic, row.subscription))
            if s is not None:
                expected[s].append((row.connected_since.value, row.Index, row.consumer_name))
        layout = from_frame(keys, consumers)
        got = [[m.name for m in layout.members(s)] for s in range(len(keys))]
        assert got == [[name for *_, name in sorted(rows)] for rows in expected]
