"""Consistent-hashing ring points of many consumers at once, for `key-shared-map`.

A consumer holding name index `j` has ring points `h31(name\\0j\\0i) % 65535 + 1` for
`i < points` (`pulsar_lens.core.selectors.ConsistentHashingSelector.point_hashes`). The keys of one
(name, index) pair differ only in the decimal `i`, so they are laid out as fixed-width byte
rows (one block per prefix length and digit count) and hashed with `core.hashing` in bulk.
Each pair is hashed once per table, however many subscriptions it appears in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pulsar_lens.core.hashing import murmur3_31_continued, murmur3_states, reduce_hash_array

FIRST_POINTS = 128  # hashed for every pair; enough for the default 100 replica points
_TIERS = (256, 512, 1024 + 64)  # more, on demand: up to MAX_POINTS and the candidates above
_ROWS_PER_BLOCK = 4096  # prefixes hashed together: bounds the key buffer to a few MB

I64 = npt.NDArray[np.int64]


def prefix_of(name: str, index: int, charset: str = "utf-8") -> bytes:
    """The bytes every ring-point key of this (name, index) pair starts with, as the broker's
    JVM encodes the name (`String.getBytes()`, '?' for what its charset cannot encode)."""
    return f"{name}\0{index}\0".encode(charset, "replace")


def _digits(low: int, high: int) -> npt.NDArray[np.uint8]:
    """ASCII decimals of low..high-1, all of one width, as a (high - low, width) array."""
    text = "".join(str(i) for i in range(low, high)).encode()
    return np.frombuffer(text, np.uint8).reshape(high - low, -1)


def _spans(width: int) -> list[tuple[int, int]]:
    """Replica numbers 0..width-1 split by their count of decimal digits."""
    spans, low = [], 0
    while low < width:
        high = min(width, 10 ** len(str(low)))
        spans.append((low, high))
        low = high
    return spans


def hash_points(prefixes: Sequence[bytes], width: int) -> I64:
    """Ring points 0..width-1 of every prefix, one row per prefix.

    The whole 4-byte blocks of each prefix are hashed once (`murmur3_states`); each point
    only adds the prefix's last bytes and its decimal, so a long name costs its length
    once, not once per point."""
    out = np.empty((len(prefixes), width), np.int64)
    if not len(prefixes):
        return out
    lengths = np.fromiter(map(len, prefixes), np.int64, len(prefixes))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = np.frombuffer(b"".join(prefixes), np.uint8)
    states = murmur3_states(data, offsets)
    spans = [(low, high, _digits(low, high)) for low, high in _spans(width)]
    for rest in range(4):
        chosen = np.flatnonzero(lengths % 4 == rest)
        for at in range(0, len(chosen), _ROWS_PER_BLOCK):
            rows = chosen[at : at + _ROWS_PER_BLOCK]
            tails = data[(offsets[rows + 1] - rest)[:, None] + np.arange(rest)]
            for low, high, digits in spans:
                count, size = high - low, rest + digits.shape[1]
                keys = np.empty((len(rows), count, size), np.uint8)
                keys[:, :, :rest] = tails[:, None, :]
                keys[:, :, rest:] = digits[None, :, :]
                totals = np.repeat(lengths[rows] + digits.shape[1], count).astype(np.uint32)
                hashed = murmur3_31_continued(
                    np.repeat(states[rows], count), keys.reshape(-1, size), totals
                )
                reduced = reduce_hash_array(hashed, selector="consistent")
                out[rows, low:high] = reduced.reshape(len(rows), count)
    return out


class PointTable:
    """Ring points per (name, name index) pair, hashed in bulk as they are first needed."""

    def __init__(self, charset: str = "utf-8") -> None:
        self.charset = charset
        self._ids: dict[tuple[str, int], int] = {}
        self._prefixes: list[bytes] = []
        self._narrow: I64 = np.zeros((0, FIRST_POINTS), np.int64)
        self._wide: dict[int, I64] = {}
        self._index_keys: dict[tuple[str, int, int], I64] = {}

    def ids(self, pairs: Sequence[tuple[str, int]]) -> I64:
        """The table's id of each (name, index) pair."""
        out = np.empty(len(pairs), np.int64)
        for k, pair in enumerate(pairs):
            found = self._ids.get(pair)
            if found is None:
                found = self._ids[pair] = len(self._prefixes)
                self._prefixes.append(prefix_of(*pair, self.charset))
            out[k] = found
        return out

    def points(self, ids: I64, width: int) -> I64:
        """Ring points 0..width-1 of each id, one row per id."""
        if width <= FIRST_POINTS:
            if len(self._narrow) < len(self._prefixes):
                fresh = hash_points(self._prefixes[len(self._narrow) :], FIRST_POINTS)
                self._narrow = np.concatenate([self._narrow, fresh])
            return self._narrow[ids, :width]
        wanted = [i for i in np.unique(ids).tolist() if len(self._wide.get(i, ())) < width]
        if wanted:
            tier = next((t for t in _TIERS if t >= width), width)
            rows = hash_points([self._prefixes[i] for i in wanted], tier)
            self._wide.update(zip(wanted, rows, strict=True))
        if not len(ids):
            return np.zeros((0, width), np.int64)
        return np.stack([self._wide[i][:width] for i in ids.tolist()])

    def index_keys(self, name: str, indexes: int, width: int) -> I64:
        """`j << 16 | point`, sorted, for the ring points 0..width-1 of `name` holding each
        name index j < indexes."""
        key = (name, indexes, width)
        if key not in self._index_keys:
            ring = self.points(self.ids([(name, j) for j in range(indexes)]), width)
            shifted = np.arange(indexes, dtype=np.int64)[:, None] << 16
            self._index_keys[key] = np.sort((shifted | ring).ravel())
        return self._index_keys[key]

    def first_positions(self, ids: I64, owners: I64, hashes: I64, width: int) -> I64:
        """For each query (owners[k], hashes[k]): the least replica number below `width` at
        which the pair `ids[owners[k]]` has ring point hashes[k], or -1."""
        table = self.points(ids, width)
        bits = max(1, int(width - 1).bit_length())
        rows = np.repeat(np.arange(len(ids), dtype=np.int64), width)
        replicas = np.tile(np.arange(width, dtype=np.int64), len(ids))
        keys = np.sort((((rows << 16) | table.ravel()) << bits) | replicas)
        wanted = ((owners << 16) | hashes) << bits
        at = np.searchsorted(keys, wanted)
        hit = at < len(keys)
        hit[hit] = (keys[at[hit]] >> bits) == (wanted[hit] >> bits)
        found = np.full(len(wanted), -1, np.int64)
        found[hit] = keys[at[hit]] & ((1 << bits) - 1)
        return found
