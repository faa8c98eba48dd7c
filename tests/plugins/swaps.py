"""Names of product modules set to other values for a block: an implementation an analysis
had before, run beside the one it has now (tests and benchmarks comparing the two)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def swapped(swaps: Iterable[tuple[Any, str, Any]]) -> Iterator[None]:
    """Each (module, name, value) of `swaps` set for the block; every name's value before it
    is back afterwards, however the block ends."""
    chosen = list(swaps)
    saved = [(module, name, getattr(module, name)) for module, name, _ in chosen]
    try:
        for module, name, value in chosen:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
