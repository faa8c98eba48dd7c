"""A compiled murmur3 x86_32 kernel over Arrow buffers, used when numba is installed.

Grouping keys by length (core.hashing's numpy path) pays a gather and a scatter per length;
a compiled loop over the offsets does not, which matters for keys of mixed lengths.
Compiled lazily on first use, never at import.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Kernel = Callable[
    [npt.NDArray[np.uint8], npt.NDArray[np.signedinteger[Any]], Any, int, int, bool], None
]


def available() -> bool:
    return importlib.util.find_spec("numba") is not None


@functools.cache
def kernel() -> Kernel:
    """The compiled `(data, offsets, out, modulus, plus, zero_to_one) -> None` kernel over
    Arrow's own buffers: value i is `data[offsets[i]:offsets[i + 1]]`; out gets its 31-bit
    hash reduced as `pulsar_lens.core.hashing.reduction` describes (modulus 0: not reduced)."""
    from numba import njit  # deferred: importing numba costs ~0.5 s

    u32 = np.uint32

    @njit(cache=True, nogil=True)
    def murmur(  # pragma: no cover
        data: Any, offsets: Any, out: Any, modulus: int, plus: int, zero_to_one: bool
    ) -> None:
        c1, c2 = u32(0xCC9E2D51), u32(0x1B873593)
        for row in range(out.shape[0]):
            start = offsets[row]
            n = offsets[row + 1] - start
            h = u32(0)
            blocks = n // 4
            for b in range(blocks):
                i = start + 4 * b
                k = (
                    u32(data[i])
                    | u32(u32(data[i + 1]) << u32(8))
                    | u32(u32(data[i + 2]) << u32(16))
                    | u32(u32(data[i + 3]) << u32(24))
                )
                k = u32(k * c1)
                k = u32(u32(k << u32(15)) | u32(k >> u32(17)))
                h ^= u32(k * c2)
                h = u32(u32(h << u32(13)) | u32(h >> u32(19)))
                h = u32(h * u32(5) + u32(0xE6546B64))
            tail, rest = start + 4 * blocks, n & 3
            k = u32(0)
            if rest >= 3:
                k ^= u32(u32(data[tail + 2]) << u32(16))
            if rest >= 2:
                k ^= u32(u32(data[tail + 1]) << u32(8))
            if rest >= 1:
                k ^= u32(data[tail])
                k = u32(k * c1)
                k = u32(u32(k << u32(15)) | u32(k >> u32(17)))
                h ^= u32(k * c2)
            h ^= u32(n)
            h ^= h >> u32(16)
            h = u32(h * u32(0x85EBCA6B))
            h ^= h >> u32(13)
            h = u32(h * u32(0xC2B2AE35))
            h ^= h >> u32(16)
            h &= u32(0x7FFFFFFF)
            if modulus:
                h = u32(h % u32(modulus) + u32(plus))
                if zero_to_one and h == 0:
                    h = u32(1)
            out[row] = h

    return murmur


@functools.cache
def states_kernel() -> Callable[[npt.NDArray[np.uint8], npt.NDArray[np.int64], Any], None]:
    """The compiled `(data, offsets, out) -> None` kernel: out[i] gets the murmur3 state
    (seed 0) after the whole 4-byte blocks of value i (`core.hashing.murmur3_states`)."""
    from numba import njit  # deferred, as above

    u32 = np.uint32

    @njit(cache=True, nogil=True)
    def states(data: Any, offsets: Any, out: Any) -> None:  # pragma: no cover
        c1, c2 = u32(0xCC9E2D51), u32(0x1B873593)
        for row in range(out.shape[0]):
            start = offsets[row]
            h = u32(0)
            for b in range((offsets[row + 1] - start) // 4):
                i = start + 4 * b
                k = (
                    u32(data[i])
                    | u32(u32(data[i + 1]) << u32(8))
                    | u32(u32(data[i + 2]) << u32(16))
                    | u32(u32(data[i + 3]) << u32(24))
                )
                k = u32(k * c1)
                k = u32(u32(k << u32(15)) | u32(k >> u32(17)))
                h ^= u32(k * c2)
                h = u32(u32(h << u32(13)) | u32(h >> u32(19)))
                h = u32(h * u32(5) + u32(0xE6546B64))
            out[row] = h

    return states
