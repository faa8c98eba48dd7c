"""Pulsar's hashes: murmur3 (sticky keys, failover ring) and CRC32 (topic -> bundle).

The sticky-key hash is the murmur3 x86_32 hash (seed 0, 31 bits) of a message's sticky key,
reduced to the key-hash range of the Key_Shared selector in use. `murmur3_31_array` computes
the same 31-bit value for every element of an Arrow string/binary array at once.
"""

from __future__ import annotations

import base64
import binascii
import typing
import zlib
from typing import Literal

import mmh3
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from pulsar_lens.core import murmur_jit
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.pulsarvalues import DEFAULT_POINTS as DEFAULT_POINTS
from pulsar_lens.core.pulsarvalues import PULSAR_LINES as PULSAR_LINES
from pulsar_lens.core.pulsarvalues import RANGE_SIZE as RANGE_SIZE
from pulsar_lens.core.pulsarvalues import SELECTOR_KINDS as SELECTOR_KINDS
from pulsar_lens.core.pulsarvalues import PulsarLine as PulsarLine
from pulsar_lens.core.pulsarvalues import SelectorKind as SelectorKind

INT31_MASK = 0x7FFFFFFF

CONSISTENT_HASH_MAX = 65535
"""4.0 consistent hashing reduces into [1, 65535] (`h31 % 65535 + 1`)."""

NONE_KEY = b"NONE_KEY"
"""The sticky key of a message with neither ordering key, partition key nor (4.0) producer."""

U32 = npt.NDArray[np.uint32]
U8 = npt.NDArray[np.uint8]
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_CHUNK = 1 << 14  # rows per pass: keeps each working array in L2


def murmur3_31(data: bytes) -> int:
    """Pulsar's `Murmur3_32Hash.makeHash`: murmur3 x86_32, seed 0, masked to 31 bits."""
    return mmh3.hash(data, 0, signed=False) & INT31_MASK


def topic_bundle_hash(topic: str) -> int:
    """The unsigned CRC-32 of the full topic name that places a topic in a bundle."""
    return zlib.crc32(topic.encode("utf-8"))


def reduction(
    *, selector: SelectorKind = "consistent", pulsar: PulsarLine = "4.0"
) -> tuple[int, int, bool]:
    """How a broker of `pulsar` line turns a 31-bit murmur3 value into a sticky-key hash, as
    `(modulus, plus, zero_to_one)`: `h31 % modulus + plus` (modulus 0: `h31` itself), then 0
    becomes 1 when `zero_to_one`.

    4.0: consistent hashing `h31 % 65535 + 1`; auto split and sticky `h31 % 65536`, 0 -> 1
    (`StickyKeyConsumerSelectorUtils.makeStickyKeyHash`, 0 is reserved as "not set").
    3.0: consistent hashing uses `h31` itself; auto split and sticky select by `h31 % 65536`.
    """
    if pulsar == "4.0":
        if selector == "consistent":
            return CONSISTENT_HASH_MAX, 1, False
        return RANGE_SIZE, 0, True
    if selector == "consistent":
        return 0, 0, False
    return RANGE_SIZE, 0, False


def reduce_hash(
    h31: int, *, selector: SelectorKind = "consistent", pulsar: PulsarLine = "4.0"
) -> int:
    """The sticky-key hash a broker of `pulsar` line derives from a 31-bit murmur3 value
    (`reduction` says how; spelled out here because selectors call it per ring point)."""
    if pulsar == "4.0":
        if selector == "consistent":
            return h31 % CONSISTENT_HASH_MAX + 1
        return (h31 % RANGE_SIZE) or 1
    if selector == "consistent":
        return h31
    return h31 % RANGE_SIZE


def sticky_key_hash(
    key: bytes, *, selector: SelectorKind = "consistent", pulsar: PulsarLine = "4.0"
) -> int:
    """The hash the broker routes a sticky key by (see `reduce_hash`)."""
    return reduce_hash(murmur3_31(key), selector=selector, pulsar=pulsar)


def resolve_sticky_key(
    *,
    ordering_key: bytes | None = None,
    partition_key: str | None = None,
    partition_key_b64: bool = False,
    producer_name: str | None = None,
    sequence_id: int | None = None,
    pulsar: PulsarLine = "4.0",
) -> bytes:
    """The bytes the broker hashes for an entry (`Commands.resolveStickyKey`).

    Ordering key, else partition key (base64-decoded when flagged), else on 4.0
    `producer_name + "-" + sequence_id`, else `NONE_KEY`. For a batch entry pass the
    fields of the batch, which the producer copies from the batch's first message.
    """
    if ordering_key is not None:
        return bytes(ordering_key)
    if partition_key is not None:
        if partition_key_b64:
            return _b64decode(partition_key)
        return partition_key.encode("utf-8")
    if pulsar == "4.0" and producer_name is not None and sequence_id is not None:
        return f"{producer_name}-{sequence_id}".encode()
    return NONE_KEY


def _b64decode(text: str) -> bytes:
    # Java's basic decoder accepts missing padding; Python's needs it.
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ModelError(
            f"partition key {text[:40]!r} is flagged base64 but is not valid base64",
            model="partition-key",
            field="partition key",
            value=text[:40],
        ) from exc


def reduce_hash_array(
    h31: U32, *, selector: SelectorKind = "consistent", pulsar: PulsarLine = "4.0"
) -> U32:
    """`reduce_hash` over an array of 31-bit hashes (returns a new uint32 array)."""
    modulus, plus, zero_to_one = reduction(selector=selector, pulsar=pulsar)
    if not modulus:
        return np.array(h31, dtype=np.uint32, copy=True)
    if modulus == RANGE_SIZE:
        out = np.bitwise_and(h31, np.uint32(RANGE_SIZE - 1))
    else:
        out = np.remainder(h31, np.uint32(modulus))
    if plus:
        np.add(out, np.uint32(plus), out=out)
    if zero_to_one:
        out[out == 0] = 1
    return out


def sticky_key_hash_array(
    keys: pa.Array | pa.ChunkedArray,
    *,
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
) -> U32:
    """`sticky_key_hash` of every element of an Arrow string/binary array (nulls as b"")."""
    reduce = reduction(selector=selector, pulsar=pulsar)
    if isinstance(keys, pa.ChunkedArray):
        parts = [sticky_key_hash_array(c, selector=selector, pulsar=pulsar) for c in keys.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    offsets, data = _arrow_buffers(keys)
    if _compiled_path(offsets, "auto"):
        out = np.empty(len(offsets) - 1, np.uint32)
        murmur_jit.kernel()(data, offsets, out, *reduce)  # hashing and reduction in one pass
        return out
    return reduce_hash_array(
        murmur3_31_array(keys, engine="numpy"), selector=selector, pulsar=pulsar
    )


def _compiled_path(offsets: npt.NDArray[np.signedinteger[typing.Any]], engine: str) -> bool:
    """Use the compiled loop? Always for "jit"; for "auto", when numba is there and the
    lengths differ (equal lengths form one 2-D block, where numpy's block path is fastest)."""
    if engine == "jit":
        return True
    if engine != "auto" or len(offsets) < 2 or not murmur_jit.available():
        return False
    n, first = len(offsets) - 1, int(offsets[1] - offsets[0])
    if int(offsets[-1] - offsets[0]) != first * n:  # the total alone proves lengths differ
        return True
    return bool((np.diff(offsets) != first).any())


def murmur3_31_array(
    keys: pa.Array | pa.ChunkedArray, *, engine: Literal["auto", "jit", "numpy"] = "auto"
) -> U32:
    """`murmur3_31` of every element of an Arrow string/binary array, bit-identical to mmh3.

    Works on the Arrow buffers directly (no Python objects). `engine="jit"` runs a compiled
    loop over the offsets (core.murmur_jit, needs numba); `"numpy"` groups keys by length and
    hashes block by block with numpy; `"auto"` takes the first available. A null element is
    hashed as its stored bytes, which are empty for arrays built the usual way; mask with
    `keys.is_null()` where nulls matter.
    """
    if isinstance(keys, pa.ChunkedArray):
        parts = [murmur3_31_array(chunk, engine=engine) for chunk in keys.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    offsets, data = _arrow_buffers(keys)
    out = np.empty(len(offsets) - 1, np.uint32)
    if len(out) == 0:
        return out
    if _compiled_path(offsets, engine):
        murmur_jit.kernel()(data, offsets, out, 0, 0, False)
        return out
    lengths = np.diff(offsets)
    lo, hi = int(lengths.min()), int(lengths.max())
    uniform = lo == hi  # Arrow stores values back to back: one 2-D block
    starts = offsets[:-1].astype(np.int64)
    if hi == 0:
        out[:] = 0  # murmur3 of b"" with seed 0
    elif uniform:
        rows = data[int(starts[0]) : int(starts[0]) + lo * len(starts)].reshape(-1, lo)
        _hash_rows_into(out, rows, lo)
    else:
        for length, members in _length_groups(lengths, lo, hi):
            out[members] = _hash_gathered(data, starts[members], length)
    np.bitwise_and(out, np.uint32(INT31_MASK), out=out)
    return out


def _arrow_buffers(keys: pa.Array) -> tuple[npt.NDArray[np.signedinteger[typing.Any]], U8]:
    """Zero-copy views of a string/binary array's offsets (n + 1) and data bytes."""
    kind = keys.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        offset_type: np.dtype[np.signedinteger[typing.Any]] = np.dtype(np.int32)
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        offset_type = np.dtype(np.int64)
    else:
        raise TypeError(f"murmur3_31_array needs a string or binary array, got {kind}")
    _, offsets_buf, data_buf = keys.buffers()[:3]
    n = len(keys)
    offsets = np.frombuffer(
        offsets_buf, dtype=offset_type, count=n + 1, offset=keys.offset * offset_type.itemsize
    )
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return offsets, data


def _length_groups(
    lengths: npt.NDArray[np.int64], lo: int, hi: int
) -> list[tuple[int, npt.NDArray[np.intp]]]:
    distinct = np.flatnonzero(np.bincount(lengths - lo)) + lo
    if len(distinct) <= 12:
        return [(int(size), np.flatnonzero(lengths == size)) for size in distinct]
    narrow = lengths.astype(np.uint16) if hi < 65536 else lengths
    order = np.argsort(narrow, kind="stable")
    bounds = [*np.searchsorted(lengths[order], distinct, side="left").tolist(), len(order)]
    return [(int(size), order[bounds[i] : bounds[i + 1]]) for i, size in enumerate(distinct)]


def _hash_gathered(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], length: int) -> U32:
    out = np.empty(len(starts), np.uint32)
    if length == 0:
        out[:] = 0  # murmur3 of b"" with seed 0
        return out
    window = np.lib.stride_tricks.sliding_window_view(data, length)
    for lo in range(0, len(starts), _CHUNK):
        _hash_rows_into(out[lo : lo + _CHUNK], window[starts[lo : lo + _CHUNK]], length)
    return out


def _hash_rows_into(out: U32, rows: npt.NDArray[np.uint8], length: int) -> None:
    """murmur3 x86_32 (seed 0) of each row of `rows` (all `length` bytes long) into `out`."""
    for lo in range(0, rows.shape[0], _CHUNK):
        chunk = rows[lo : lo + _CHUNK]
        out[lo : lo + len(chunk)] = _murmur_rows(chunk, length)


def _murmur_rows(rows: npt.NDArray[np.uint8], length: int) -> U32:
    return _murmur_from(np.zeros(rows.shape[0], np.uint32), rows, length, np.uint32(length))


def _murmur_from(h: U32, rows: npt.NDArray[np.uint8], length: int, totals: U32 | np.uint32) -> U32:
    """murmur3 continued from states `h` over the first `length` bytes of each row, then
    finished for keys of `totals` bytes in all (`h` is updated in place and returned)."""
    m = rows.shape[0]
    k = np.empty(m, np.uint32)
    tmp = np.empty(m, np.uint32)
    full = length // 4
    if full:
        blocks = rows[:, : 4 * full].view("<u4")
        for j in range(full):
            np.copyto(k, blocks[:, j])
            _mix(h, k, tmp)
    rest = length & 3
    if rest:
        base = 4 * full
        np.copyto(k, rows[:, base], casting="unsafe")
        for i in range(1, rest):
            np.left_shift(rows[:, base + i], np.uint32(8 * i), out=tmp, casting="unsafe")
            np.bitwise_or(k, tmp, out=k)
        _scramble(k, tmp)
        np.bitwise_xor(h, k, out=h)
    np.bitwise_xor(h, totals, out=h)
    _fmix(h, tmp)
    return h


def _mix(h: U32, k: U32, tmp: U32) -> None:
    """One 4-byte block `k` into the states `h` (`k` is scrambled in place)."""
    _scramble(k, tmp)
    np.bitwise_xor(h, k, out=h)
    _rotl(h, 13, tmp)
    np.multiply(h, np.uint32(5), out=h)
    np.add(h, np.uint32(0xE6546B64), out=h)


def murmur3_states(data: U8, offsets: npt.NDArray[np.int64]) -> U32:
    """The murmur3 x86_32 state (seed 0) after the whole 4-byte blocks of each value
    `data[offsets[i]:offsets[i + 1]]`: what every key starting with that value shares.

    Hashing many keys that share a long prefix then costs the prefix once, not once per key.
    Compiled when numba is there; else one numpy pass per block of the longest value, over
    all values at once."""
    n = len(offsets) - 1
    if murmur_jit.available():
        out = np.zeros(n, np.uint32)
        murmur_jit.states_kernel()(data, offsets, out)
        return out
    return _states_numpy(data, offsets)


def _states_numpy(data: U8, offsets: npt.NDArray[np.int64]) -> U32:
    n = len(offsets) - 1
    blocks = np.diff(offsets) // 4
    order = np.argsort(-blocks, kind="stable")  # values still going form a leading slice
    live = np.searchsorted(-blocks[order], -np.arange(int(blocks.max(initial=0))), "left")
    starts = offsets[:-1][order]
    h, k, tmp = (np.zeros(n, np.uint32) for _ in range(3))
    for j, count in enumerate(live.tolist()):
        at = starts[:count] + 4 * j
        word, part = k[:count], tmp[:count]
        np.copyto(word, data[at], casting="unsafe")
        for i in range(1, 4):
            np.left_shift(data[at + i], np.uint32(8 * i), out=part, casting="unsafe")
            np.bitwise_or(word, part, out=word)
        _mix(h[:count], word, part)
    out = np.empty(n, np.uint32)
    out[order] = h
    return out


def murmur3_31_continued(states: U32, rows: npt.NDArray[np.uint8], totals: U32) -> U32:
    """`murmur3_31` of keys whose leading whole blocks left `states` (`murmur3_states`) and
    whose remaining bytes are the rows (all as long), each key `totals` bytes in all."""
    h = np.array(states, np.uint32, copy=True)
    out = _murmur_from(h, rows, rows.shape[1], np.asarray(totals, np.uint32))
    return np.bitwise_and(out, np.uint32(INT31_MASK), out=out)


def _rotl(x: U32, r: int, tmp: U32) -> None:
    np.left_shift(x, np.uint32(r), out=tmp)
    np.right_shift(x, np.uint32(32 - r), out=x)
    np.bitwise_or(x, tmp, out=x)


def _scramble(k: U32, tmp: U32) -> None:
    np.multiply(k, _C1, out=k)
    _rotl(k, 15, tmp)
    np.multiply(k, _C2, out=k)


def _fmix(h: U32, tmp: U32) -> None:
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        np.right_shift(h, np.uint32(shift), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        np.multiply(h, np.uint32(factor), out=h)
    np.right_shift(h, np.uint32(16), out=tmp)
    np.bitwise_xor(h, tmp, out=h)
