"""Topic names with a chosen CRC-32, to land exactly on bundle boundaries in tests.

For messages of one length CRC-32 is affine over GF(2): flipping a set of bits XORs the CRC
with the XOR of each flip's effect. A suffix of letters p..w (0x70 | three free bits) gives
enough free bits to reach any 32-bit value; Gaussian elimination finds which to flip.
"""

from __future__ import annotations

import zlib

SUFFIX_LENGTH = 16
_BASE_LETTER = 0x70  # 'p'; 'p' | 0..7 stays within p..w


def forge_name(prefix: str, target: int) -> str:
    """`prefix` + 16 letters in p..w whose UTF-8 CRC-32 is exactly `target`."""
    head = prefix.encode("utf-8")
    base = bytes([_BASE_LETTER]) * SUFFIX_LENGTH
    start = zlib.crc32(head + base)
    flips: list[tuple[int, int]] = []  # (effect on the CRC, flip as a bit set over the suffix)
    for i in range(SUFFIX_LENGTH):
        for bit in range(3):
            changed = bytearray(base)
            changed[i] ^= 1 << bit
            flips.append((zlib.crc32(head + bytes(changed)) ^ start, 1 << (3 * i + bit)))
    pivots: dict[int, tuple[int, int]] = {}
    for effect, chosen in flips:
        for top in sorted(pivots, reverse=True):
            if effect >> top & 1:
                effect ^= pivots[top][0]
                chosen ^= pivots[top][1]
        if effect:
            pivots[effect.bit_length() - 1] = (effect, chosen)
    need, chosen = target ^ start, 0
    for top in sorted(pivots, reverse=True):
        if need >> top & 1:
            need ^= pivots[top][0]
            chosen ^= pivots[top][1]
    if need:
        raise ValueError(f"no suffix reaches CRC 0x{target:08x} after {prefix!r}")
    suffix = bytes(_BASE_LETTER | ((chosen >> (3 * i)) & 7) for i in range(SUFFIX_LENGTH)).decode()
    return prefix + suffix
