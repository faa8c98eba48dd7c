"""Bundle model: default boundaries, parsing, topic -> bundle, range_equally_divide split."""

from __future__ import annotations

import pytest

from pulsar_lens.core.bundles import (
    FULL_UPPER,
    BundleRange,
    bundle_index,
    bundle_name,
    bundle_ranges,
    default_boundaries,
    find_bundle,
    full_topic_name,
    parse_bundle_name,
    parse_bundles,
    split_point,
    topic_bundle,
    topic_bundles,
    with_split,
)
from pulsar_lens.core.errors import ModelError
from tests.crcforge import forge_name

FOUR = default_boundaries(4)


def test_default_boundaries_four() -> None:
    assert FOUR == (0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF)


def test_default_boundaries_three() -> None:
    assert default_boundaries(3) == (0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF)


def test_default_boundaries_ten() -> None:
    bounds = default_boundaries(10)
    assert [f"0x{b:08x}" for b in bounds[:5]] == [
        "0x00000000",
        "0x19999999",
        "0x33333332",
        "0x4ccccccb",
        "0x66666664",
    ]
    assert len(bounds) == 11 and bounds[-1] == FULL_UPPER
    assert bundle_name(bounds[3], bounds[4]) == "0x4ccccccb_0x66666664"


def test_default_boundaries_one_covers_everything() -> None:
    assert default_boundaries(1) == (0, FULL_UPPER)


@pytest.mark.parametrize("count", [0, -1, 2**32 + 1])
def test_default_boundaries_rejects_counts_outside_range(count: int) -> None:
    with pytest.raises(ModelError, match="number of bundles"):
        default_boundaries(count)


def test_parse_bundles_reads_admin_payload() -> None:
    payload = {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    }
    assert parse_bundles(payload) == FOUR


@pytest.mark.parametrize(
    "payload",
    [
        {"numBundles": 1},
        {"boundaries": ["0x00000000", "0xzz"], "numBundles": 1},
        {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 2},
        {"boundaries": ["0x00000001", "0xffffffff"]},
        {"boundaries": ["0x00000000", "0x80000000", "0x80000000", "0xffffffff"]},
        {"boundaries": ["0x00000000"]},
    ],
)
def test_parse_bundles_rejects_bad_payloads(payload: dict[str, object]) -> None:
    with pytest.raises(ModelError):
        parse_bundles(payload)


def test_bundle_ranges_name_each_bundle() -> None:
    assert [r.name for r in bundle_ranges(FOUR)] == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]


def test_parse_bundle_name_round_trips() -> None:
    assert parse_bundle_name("0x4ccccccb_0x66666664") == BundleRange(0x4CCCCCCB, 0x66666664)
    with pytest.raises(ModelError):
        parse_bundle_name("0x40000000-0x80000000")
    with pytest.raises(ModelError):
        parse_bundle_name("0x80000000_0x40000000")


@pytest.mark.parametrize(
    ("hash_value", "index"),
    [(0, 0), (0x3FFFFFFF, 0), (0x40000000, 1), (0x40000001, 1), (0xC0000000, 3), (0xFFFFFFFE, 3)],
)
def test_bundle_index_exact_hit_opens_the_bundle(hash_value: int, index: int) -> None:
    assert bundle_index(FOUR, hash_value) == index


def test_bundle_index_has_no_bundle_for_last_boundary() -> None:
    # the 4.0 broker fails such a lookup with IndexOutOfBoundsException (HTTP 500)
    with pytest.raises(ModelError, match="0xffffffff"):
        bundle_index(FOUR, FULL_UPPER)


def test_find_bundle_returns_range() -> None:
    assert find_bundle(FOUR, 0x80000000) == BundleRange(0x80000000, 0xC0000000)


def test_topic_bundle_hashes_full_name_to_exact_boundary() -> None:
    topic = forge_name("persistent://public/default/edge-", 0x40000000)
    assert topic_bundle(FOUR, topic).name == "0x40000000_0x80000000"
    below = forge_name("persistent://public/default/edge-", 0x3FFFFFFF)
    assert topic_bundle(FOUR, below).name == "0x00000000_0x40000000"


def test_topic_bundle_expands_short_names() -> None:
    topic = forge_name("persistent://public/default/", 0x80000000)
    short = topic.removeprefix("persistent://public/default/")
    assert topic_bundle(FOUR, short).name == "0x80000000_0xc0000000"
    assert topic_bundle(FOUR, f"public/default/{short}").name == "0x80000000_0xc0000000"


def test_full_topic_name_forms() -> None:
    assert full_topic_name("x") == "persistent://public/default/x"
    assert full_topic_name("t/ns/x") == "persistent://t/ns/x"
    assert full_topic_name("non-persistent://t/ns/x") == "non-persistent://t/ns/x"
    with pytest.raises(ModelError):
        full_topic_name("a/b")


def test_split_point_reference_vector() -> None:
    # RangeEquallyDivideBundleSplitAlgorithmTest: [10, 0xffffffff] -> 2147483652
    assert split_point(BundleRange(10, 0xFFFFFFFF)) == 2147483652


def test_split_point_of_last_default_bundle() -> None:
    assert split_point(BundleRange(0xC0000000, 0xFFFFFFFF)) == 0xDFFFFFFF


def test_split_point_refuses_unit_range() -> None:
    with pytest.raises(ModelError, match="can't be split"):
        split_point(BundleRange(5, 6))


def test_with_split_inserts_boundary() -> None:
    split = with_split(FOUR, BundleRange(0xC0000000, 0xFFFFFFFF))
    assert split == (0, 0x40000000, 0x80000000, 0xC0000000, 0xDFFFFFFF, 0xFFFFFFFF)
    again = with_split(split, BundleRange(0, 0x40000000))
    assert [r.name for r in bundle_ranges(again)][:2] == [
        "0x00000000_0x20000000",
        "0x20000000_0x40000000",
    ]


def test_with_split_at_given_point() -> None:
    assert with_split(FOUR, BundleRange(0, 0x40000000), at=0x10) == (0, 0x10, *FOUR[1:])


def test_with_split_rejects_unknown_bundle_and_bad_point() -> None:
    with pytest.raises(ModelError, match="is not one of"):
        with_split(FOUR, BundleRange(0, 0x80000000))
    with pytest.raises(ModelError, match="strictly inside"):
        with_split(FOUR, BundleRange(0, 0x40000000), at=0x40000000)


def test_topic_bundles_places_many_like_topic_bundle() -> None:
    topics = [f"persistent://public/default/t-{i}" for i in range(200)]
    placed = topic_bundles(default_boundaries(10), topics)
    assert placed == {t: topic_bundle(default_boundaries(10), t) for t in topics}
