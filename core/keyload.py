"""Sampled key load per consumer: how many sampled messages and keys fall in each consumer's
hash ranges (`key_samples` rows against the ranges a broker reported or a model predicted)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from pulsar_lens.core.hashing import PulsarLine, SelectorKind, sticky_key_hash_array
from pulsar_lens.core.model import HashRange

UNCOVERED = "(uncovered)"
"""The row of sampled messages whose hash no consumer's ranges contain."""

KEY_LOAD_COLUMNS = ["consumer_name", "sampled_messages", "distinct_keys", "share", "key_share"]


def sample_hashes(
    keys: Sequence[str] | pd.Series,
    *,
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
) -> npt.NDArray[np.int64]:
    """The sticky hash of every sampled key (its UTF-8 bytes) under `selector` and `pulsar`.

    A `key_samples` row stores the 4.0 consistent-hashing hash; STICKY and auto-split ranges
    need the other reduction, so the hash is derived from the key again.
    """
    values = keys.fillna("").astype(str).tolist() if isinstance(keys, pd.Series) else list(keys)
    hashes = sticky_key_hash_array(pa.array(values, pa.string()), selector=selector, pulsar=pulsar)
    return hashes.astype(np.int64)


def compute_key_load(
    samples: pd.DataFrame,
    ranges: Mapping[str, Sequence[HashRange]],
    *,
    selector: SelectorKind = "consistent",
    pulsar: PulsarLine = "4.0",
) -> pd.DataFrame:
    """Per consumer: sampled messages and distinct keys whose hash lies in its inclusive
    ranges, and their shares of all sampled messages / keys.

    `samples` needs a `key` column (rows of `key_samples`, already filtered to one topic or
    subscription). Consumers keep the order of `ranges`; an `UNCOVERED` row follows when some
    hashes lie in no range. Where ranges overlap (readers), a message counts for every consumer
    covering it, so shares may add up to more than 1.
    """
    keys = samples["key"].fillna("").astype(str).reset_index(drop=True)
    hashes = sample_hashes(keys, selector=selector, pulsar=pulsar)
    total, total_keys = len(hashes), int(keys.nunique())
    covered = np.zeros(len(hashes), dtype=bool)
    rows = []
    for consumer, owned in ranges.items():
        mask = _in_ranges(hashes, owned)
        covered |= mask
        rows.append(_row(consumer, keys[mask], total, total_keys))
    if not covered.all():
        rows.append(_row(UNCOVERED, keys[~covered], total, total_keys))
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in KEY_LOAD_COLUMNS})
    return pd.DataFrame(rows, columns=KEY_LOAD_COLUMNS)


def _in_ranges(hashes: npt.NDArray[np.int64], ranges: Sequence[HashRange]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(hashes), dtype=bool)
    for start, end in ranges:
        mask |= (hashes >= start) & (hashes <= end)
    return mask


def _row(consumer: str, keys: pd.Series, total: int, total_keys: int) -> dict[str, object]:
    distinct = int(keys.nunique())
    return {
        "consumer_name": consumer,
        "sampled_messages": len(keys),
        "distinct_keys": distinct,
        "share": len(keys) / total if total else None,
        "key_share": distinct / total_keys if total_keys else None,
    }
