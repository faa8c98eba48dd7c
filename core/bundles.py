"""Namespace bundles: boundaries, topic -> bundle, and the `range_equally_divide` split.

A namespace's hash space 0x00000000..0xffffffff is cut by sorted boundaries; bundle i covers
`[b_i, b_{i+1})`. A topic lands by the CRC-32 of its full name
(`pulsar_lens.core.hashing.topic_bundle_hash`).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import topic_bundle_hash
from pulsar_lens.core.topicname import TopicNameError, parse_topic_name

FULL_LOWER = 0x00000000
FULL_UPPER = 0xFFFFFFFF
MAX_BUNDLES = 2**32
DOMAINS = ("persistent", "non-persistent")


@dataclass(frozen=True, slots=True)
class BundleRange:
    """One bundle: hashes `lower <= h < upper` (the broker never places 0xffffffff)."""

    lower: int
    upper: int

    @property
    def name(self) -> str:
        return bundle_name(self.lower, self.upper)


def bundle_name(lower: int, upper: int) -> str:
    """The broker's bundle name, e.g. `0x00000000_0x40000000`."""
    return f"0x{lower:08x}_0x{upper:08x}"


def parse_bundle_name(name: str) -> BundleRange:
    """`0x00000000_0x40000000` -> BundleRange(0, 0x40000000)."""
    lower_text, sep, upper_text = name.partition("_")
    try:
        if not sep:
            raise ValueError(name)
        lower, upper = int(lower_text, 16), int(upper_text, 16)
    except ValueError as exc:
        raise ModelError(
            f"bad bundle name {name!r}; expected 0x%08x_0x%08x",
            model="bundles",
            field="bundle",
            value=name,
        ) from exc
    if not FULL_LOWER <= lower < upper <= FULL_UPPER:
        raise ModelError(
            f"bad bundle range {name!r}: need 0 <= lower < upper <= 0xffffffff",
            model="bundles",
            field="bundle",
            value=name,
        )
    return BundleRange(lower, upper)


def default_boundaries(num_bundles: int) -> tuple[int, ...]:
    """Boundaries of a namespace created with N bundles: steps of 2**32 // N, last 0xffffffff."""
    if not 0 < num_bundles <= MAX_BUNDLES:
        raise ModelError(
            f"number of bundles must be in (0, 2^32], got {num_bundles}",
            model="bundles",
            field="numBundles",
            value=str(num_bundles),
        )
    step = MAX_BUNDLES // num_bundles
    return (*(i * step for i in range(num_bundles)), FULL_UPPER)


def check_boundaries(boundaries: Sequence[int]) -> tuple[int, ...]:
    """The boundaries as a tuple, if they start at 0, end at 0xffffffff and strictly rise."""
    values = tuple(boundaries)
    if len(values) < 2 or values[0] != FULL_LOWER or values[-1] != FULL_UPPER:
        raise ModelError(
            f"bundle boundaries must run from 0x00000000 to 0xffffffff, got {_hexes(values)}",
            model="bundles",
            field="boundaries",
            value=_hexes(values),
        )
    if any(a >= b for a, b in itertools.pairwise(values)):
        raise ModelError(
            f"bundle boundaries must strictly increase, got {_hexes(values)}",
            model="bundles",
            field="boundaries",
            value=_hexes(values),
        )
    return values


def parse_bundles(payload: Mapping[str, object]) -> tuple[int, ...]:
    """GET /admin/v2/namespaces/{tenant}/{ns}/bundles -> boundaries as integers.

    The payload is `{"boundaries": ["0x00000000", ..., "0xffffffff"], "numBundles": N}`.
    """
    raw = payload.get("boundaries")
    if not isinstance(raw, list) or not all(isinstance(b, str) for b in raw):
        raise ModelError(
            f"bundles payload lacks a list of boundary strings: {payload!r:.200}",
            model="bundles",
            field="boundaries",
        )
    try:
        values = check_boundaries([int(b, 16) for b in raw])
    except ValueError as exc:
        raise ModelError(
            f"bundle boundary is not hexadecimal: {raw!r:.200}", model="bundles", field="boundaries"
        ) from exc
    declared = payload.get("numBundles")
    if declared is not None and declared != len(values) - 1:
        raise ModelError(
            f"numBundles={declared} but {len(values)} boundaries were listed",
            model="bundles",
            field="numBundles",
            value=str(declared),
        )
    return values


def bundle_ranges(boundaries: Sequence[int]) -> tuple[BundleRange, ...]:
    """Every bundle of the namespace, in hash order."""
    values = check_boundaries(boundaries)
    return tuple(BundleRange(a, b) for a, b in itertools.pairwise(values))


def bundle_index(boundaries: Sequence[int], hash_value: int) -> int:
    """Index of the bundle holding a hash; a hash equal to a boundary opens that bundle.

    The broker (`NamespaceBundles.getBundle`) binary-searches the boundaries the same way, so
    a hash of exactly 0xffffffff (the last boundary) finds no bundle: the 4.0 broker answers
    such a topic's lookup with HTTP 500 (IndexOutOfBoundsException). So does this function,
    with a ModelError.
    """
    if not FULL_LOWER <= hash_value < FULL_UPPER:
        raise ModelError(
            f"hash 0x{hash_value:08x} has no bundle: the broker places hashes 0x00000000.."
            "0xfffffffe only (a topic hashing to 0xffffffff fails its lookup)",
            model="bundles",
            field="hash",
            value=f"0x{hash_value:08x}",
        )
    return bisect.bisect_right(boundaries, hash_value) - 1


def find_bundle(boundaries: Sequence[int], hash_value: int) -> BundleRange:
    """The bundle holding a 32-bit hash."""
    values = check_boundaries(boundaries)
    index = bundle_index(values, hash_value)
    return BundleRange(values[index], values[index + 1])


def full_topic_name(topic: str) -> str:
    """The name the broker hashes (its `TopicName.toString()`), e.g. `x` ->
    `persistent://public/default/x`, `PERSISTENT://t/ns/x` -> `persistent://t/ns/x`;
    ModelError with the broker's reason for a name it refuses."""
    try:
        return parse_topic_name(topic).topic
    except TopicNameError as exc:
        raise ModelError(
            f"topic {topic!r}: {exc}", model="bundles", field="topic", value=topic
        ) from None


def topic_bundle(boundaries: Sequence[int], topic: str) -> BundleRange:
    """The bundle of a topic (or one partition: each partition is placed on its own)."""
    return find_bundle(boundaries, topic_bundle_hash(full_topic_name(topic)))


def topic_bundles(boundaries: Sequence[int], topics: Iterable[str]) -> dict[str, BundleRange]:
    """The bundle of many topics at once (boundaries checked once); ModelError as topic_bundle."""
    values = check_boundaries(boundaries)
    placed: dict[str, BundleRange] = {}
    for topic in topics:
        index = bundle_index(values, topic_bundle_hash(full_topic_name(topic)))
        placed[topic] = BundleRange(values[index], values[index + 1])
    return placed


def split_point(bundle: BundleRange) -> int:
    """`range_equally_divide`: `lower + (upper - lower) // 2`."""
    if bundle.upper - bundle.lower <= 1:
        raise ModelError(
            f"bundle {bundle.name} can't be split further: its range is 1",
            model="bundles",
            field="bundle",
            value=bundle.name,
        )
    return bundle.lower + (bundle.upper - bundle.lower) // 2


def with_split(
    boundaries: Sequence[int], bundle: BundleRange, *, at: int | None = None
) -> tuple[int, ...]:
    """The boundaries after splitting one bundle (at its midpoint unless `at` is given)."""
    values = check_boundaries(boundaries)
    index = bisect.bisect_left(values, bundle.lower)
    if (
        index >= len(values) - 1
        or values[index] != bundle.lower
        or values[index + 1] != bundle.upper
    ):
        raise ModelError(
            f"bundle {bundle.name} is not one of {_hexes(values)}",
            model="bundles",
            field="bundle",
            value=bundle.name,
        )
    point = split_point(bundle) if at is None else at
    if not bundle.lower < point < bundle.upper:
        raise ModelError(
            f"split point 0x{point:08x} must lie strictly inside {bundle.name}",
            model="bundles",
            field="split point",
            value=f"0x{point:08x}",
        )
    return (*values[: index + 1], point, *values[index + 1 :])


def _hexes(values: Sequence[int]) -> str:
    shown = [f"0x{v:08x}" if isinstance(v, int) and v >= 0 else repr(v) for v in values[:8]]
    return "[" + ", ".join(shown) + (", ...]" if len(values) > 8 else "]")
