"""compute_key_load: sampled messages and keys per consumer, given hash ranges."""

from __future__ import annotations

import pandas as pd
import pytest

from pulsar_lens.core.hashing import sticky_key_hash
from pulsar_lens.core.keyload import UNCOVERED, compute_key_load, sample_hashes

KEYS = ["a"] * 6 + ["b"] * 3 + ["c"]


def samples(keys: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"topic": "t", "key": keys})


def split_at(hash_value: int) -> dict[str, list[tuple[int, int]]]:
    return {"low": [(1, hash_value)], "high": [(hash_value + 1, 65535)]}


def test_sample_hashes_match_the_scalar_hash_per_selector() -> None:
    for selector in ("consistent", "sticky", "auto-split"):
        expected = [sticky_key_hash(k.encode(), selector=selector) for k in ("a", "b", "é")]  # type: ignore[arg-type]
        assert sample_hashes(["a", "b", "é"], selector=selector).tolist() == expected  # type: ignore[arg-type]


def test_compute_key_load_counts_messages_and_keys_per_consumer() -> None:
    hashes = {k: sticky_key_hash(k.encode()) for k in "abc"}
    ranges = {name: [(h, h)] for name, h in (("ca", hashes["a"]), ("cbc", hashes["b"]))}
    ranges["cbc"].append((hashes["c"], hashes["c"]))
    load = compute_key_load(samples(KEYS), ranges)
    assert load.to_dict("records") == [
        {
            "consumer_name": "ca",
            "sampled_messages": 6,
            "distinct_keys": 1,
            "share": 0.6,
            "key_share": pytest.approx(1 / 3),
        },
        {
            "consumer_name": "cbc",
            "sampled_messages": 4,
            "distinct_keys": 2,
            "share": 0.4,
            "key_share": pytest.approx(2 / 3),
        },
    ]


def test_compute_key_load_adds_an_uncovered_row() -> None:
    load = compute_key_load(samples(KEYS), {"nobody": [(0, 0)]})
    assert list(load["consumer_name"]) == ["nobody", UNCOVERED]
    assert list(load["sampled_messages"]) == [0, 10]


def test_compute_key_load_of_the_whole_space_takes_everything() -> None:
    load = compute_key_load(samples(KEYS), split_at(32767))
    assert load["sampled_messages"].sum() == 10 and load["share"].sum() == pytest.approx(1.0)


def test_compute_key_load_uses_the_selector_reduction() -> None:
    consistent = sticky_key_hash(b"a")
    sticky = sticky_key_hash(b"a", selector="sticky")
    assert consistent != sticky
    only = {"c": [(sticky, sticky)]}
    assert compute_key_load(samples(["a"]), only, selector="sticky")["sampled_messages"][0] == 1
    assert compute_key_load(samples(["a"]), only)["sampled_messages"][0] == 0


def test_compute_key_load_of_no_samples_has_zero_counts_and_no_shares() -> None:
    load = compute_key_load(samples([]), split_at(100))
    assert list(load["sampled_messages"]) == [0, 0] and load["share"].isna().all()
