"""Pulsar's hashes: murmur3 (sticky keys, failover ring) and CRC32 (topic -> bundle)."""

from __future__ import annotations

import zlib

import mmh3

INT31_MASK = 0x7FFFFFFF


def murmur3_31(data: bytes) -> int:
    """Pulsar's `Murmur3_32Hash.makeHash`: murmur3 x86_32, seed 0, masked to 31 bits."""
    return mmh3.hash(data, 0, signed=False) & INT31_MASK


def topic_bundle_hash(topic: str) -> int:
    """The unsigned CRC-32 of the full topic name that places a topic in a bundle."""
    return zlib.crc32(topic.encode("utf-8"))
