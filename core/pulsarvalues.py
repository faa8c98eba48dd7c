"""The broker's values the models share: the key-hash range, the Key_Shared selector kinds and
broker lines, the replica points default, the JVM charset.

A module without imports of its own: the command line's argument parsers read these without
loading numpy and pyarrow (`core.hashing`) or pydantic (`core.failover`), which re-export them.
"""

from __future__ import annotations

from typing import Literal

SelectorKind = Literal["consistent", "auto-split", "sticky"]
"""consistent: consistent hashing (the default); auto-split: HashRangeAutoSplit
(`subscriptionKeySharedUseConsistentHashing=false`); sticky: KeySharedMode.STICKY."""

PulsarLine = Literal["4.0", "3.0"]

SELECTOR_KINDS: tuple[SelectorKind, ...] = ("consistent", "auto-split", "sticky")
PULSAR_LINES: tuple[PulsarLine, ...] = ("4.0", "3.0")


def model_line(version: str) -> PulsarLine:
    """The line whose models describe a broker reporting `version`: "3.0" for 3.0 and 3.0.x,
    "4.0" for any other (4.0.x, and 4.2.x, whose selectors, draining hashes, PIP-392 failover
    and bundle ranges are 4.0's, as the live tests prove on 4.2.4)."""
    return "3.0" if version == "3.0" or version.startswith("3.0.") else "4.0"


RANGE_SIZE = 65536
"""`StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE`: auto split and sticky slots are 0..65535."""

DEFAULT_POINTS = 100
"""`subscriptionKeySharedConsistentHashingReplicaPoints` default."""

JVM_CHARSET = "utf-8"
"""The ring hashes `String.getBytes()`: the broker JVM's default charset. UTF-8 on Java 18+;
on Java 17 it follows the locale (`ANSI_X3.4-1968`, i.e. ASCII, when LANG is unset)."""
