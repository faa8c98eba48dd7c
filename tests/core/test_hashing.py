"""Sticky-key hashes: reductions per selector and line, key resolution, the vectorized form."""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path
from typing import Literal

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import (
    NONE_KEY,
    PULSAR_LINES,
    SELECTOR_KINDS,
    murmur3_31,
    murmur3_31_array,
    reduce_hash,
    resolve_sticky_key,
    sticky_key_hash,
    sticky_key_hash_array,
)

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "hashes.json").read_text())


def test_sticky_key_hash_reproduces_the_docs_draining_hashes() -> None:
    for key, expected in GOLDEN["sticky_hash_4_0_consistent"]["hashes"].items():
        assert sticky_key_hash(key.encode()) == expected


def test_reduce_hash_4_0_consistent_stays_in_1_to_65535() -> None:
    assert reduce_hash(0) == 1
    assert reduce_hash(65534) == 65535
    assert reduce_hash(65535) == 1


def test_reduce_hash_4_0_auto_split_and_sticky_map_zero_to_one() -> None:
    for kind in ("auto-split", "sticky"):
        assert reduce_hash(65536 * 7, selector=kind) == 1
        assert reduce_hash(65536 * 7 + 5, selector=kind) == 5


def test_reduce_hash_3_0_keeps_the_full_hash_or_a_slot_with_zero() -> None:
    assert reduce_hash(123456789, pulsar="3.0") == 123456789
    assert reduce_hash(65536 * 3, selector="auto-split", pulsar="3.0") == 0
    assert reduce_hash(65536 * 3 + 9, selector="sticky", pulsar="3.0") == 9


def test_murmur3_31_masks_mmh3_to_31_bits() -> None:
    for key in (b"", b"a", b"key-1", "Zoë".encode(), bytes(range(256))):
        assert murmur3_31(key) == mmh3.hash(key, 0, signed=False) & 0x7FFFFFFF


def test_resolve_sticky_key_prefers_ordering_key() -> None:
    assert resolve_sticky_key(ordering_key=b"ok", partition_key="pk", producer_name="p") == b"ok"


def test_resolve_sticky_key_uses_partition_key_as_utf8() -> None:
    assert resolve_sticky_key(partition_key="Zoë", producer_name="p", sequence_id=1) == (
        "Zoë".encode()
    )


def test_resolve_sticky_key_decodes_a_base64_partition_key() -> None:
    raw = bytes([0, 255, 7, 128])
    encoded = base64.b64encode(raw).decode()
    assert resolve_sticky_key(partition_key=encoded, partition_key_b64=True) == raw
    assert resolve_sticky_key(partition_key=encoded.rstrip("="), partition_key_b64=True) == raw


def test_resolve_sticky_key_rejects_bad_base64() -> None:
    with pytest.raises(ModelError, match="not valid base64"):
        resolve_sticky_key(partition_key="*not*", partition_key_b64=True)


def test_resolve_sticky_key_falls_back_to_producer_and_sequence_on_4_0() -> None:
    assert resolve_sticky_key(producer_name="prod", sequence_id=42) == b"prod-42"


def test_resolve_sticky_key_has_no_producer_fallback_on_3_0() -> None:
    assert resolve_sticky_key(producer_name="prod", sequence_id=42, pulsar="3.0") == NONE_KEY


def test_resolve_sticky_key_without_anything_is_none_key() -> None:
    assert resolve_sticky_key() == b"NONE_KEY"


def test_resolve_sticky_key_keeps_an_empty_partition_key() -> None:
    assert resolve_sticky_key(partition_key="", producer_name="p", sequence_id=0) == b""
    assert sticky_key_hash(b"") == 1


Engine = Literal["jit", "numpy"]
ENGINES = pytest.mark.parametrize("engine", ["jit", "numpy"])


def _random_keys(count: int, *, seed: int, longest: int) -> list[bytes]:
    rng = random.Random(seed)
    return [os.urandom(rng.randrange(longest + 1)) for _ in range(count)]


@ENGINES
def test_murmur3_31_array_is_bit_identical_to_mmh3_on_every_length(engine: Engine) -> None:
    keys = _random_keys(20_000, seed=3, longest=70)
    expected = np.array([murmur3_31(k) for k in keys], np.uint32)
    for kind in (pa.binary(), pa.large_binary()):
        assert (murmur3_31_array(pa.array(keys, kind), engine=engine) == expected).all()


@ENGINES
def test_murmur3_31_array_honours_slices_and_chunks(engine: Engine) -> None:
    keys = _random_keys(3_000, seed=5, longest=20)
    expected = np.array([murmur3_31(k) for k in keys], np.uint32)
    array = pa.array(keys, pa.binary())
    assert (murmur3_31_array(array.slice(101, 1500), engine=engine) == expected[101:1601]).all()
    chunked = pa.chunked_array([array.slice(0, 1000), array.slice(1000)])
    assert (murmur3_31_array(chunked, engine=engine) == expected).all()


@ENGINES
def test_murmur3_31_array_fast_path_for_equal_lengths_matches(engine: Engine) -> None:
    keys = [f"user-{i:08d}" for i in range(50_000)]
    expected = np.array([murmur3_31(k.encode()) for k in keys], np.uint32)
    array = pa.array(keys, pa.string())
    assert (murmur3_31_array(array, engine=engine) == expected).all()
    assert (murmur3_31_array(array.slice(7), engine=engine) == expected[7:]).all()


@ENGINES
def test_murmur3_31_array_handles_empty_input_and_empty_keys(engine: Engine) -> None:
    assert murmur3_31_array(pa.array([], pa.string())).tolist() == []
    assert murmur3_31_array(pa.array(["", ""]), engine=engine).tolist() == [0, 0]


def test_murmur3_31_array_rejects_non_string_arrays() -> None:
    with pytest.raises(TypeError, match="string or binary"):
        murmur3_31_array(pa.array([1, 2]))


@pytest.mark.parametrize("pulsar", PULSAR_LINES)
@pytest.mark.parametrize("selector", SELECTOR_KINDS)
def test_sticky_key_hash_array_matches_the_scalar_form(selector: str, pulsar: str) -> None:
    keys = [*_random_keys(5000, seed=11, longest=24), b"", b"NONE_KEY"]
    equal_lengths = [f"key-{i:06d}".encode() for i in range(5000)]
    for batch in (keys, equal_lengths):  # the compiled, fused path and numpy's block path
        array = pa.array(batch, pa.binary())
        got = sticky_key_hash_array(array, selector=selector, pulsar=pulsar)  # type: ignore[arg-type]
        expected = [sticky_key_hash(k, selector=selector, pulsar=pulsar) for k in batch]  # type: ignore[arg-type]
        assert got.tolist() == expected
