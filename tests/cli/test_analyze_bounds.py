"""`pulsar-lens analyze` prints a bounded result, and says once what it cut: consumer names
of thousands of characters on thousands of ranges and draining hashes (5,000 of each, 5,000
characters a name: printed whole, about 300 MB of JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pulsar_lens.cli.bounded import Cut, bounded_frame
from pulsar_lens.core.model import ConsumerRecord, DrainingHashRecord, SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.testing import TOPIC, at, make_snapshot
from tests.lens_cli import run_lens

RANGES = 2_500  # per consumer: 8 times fewer cut the module's time by two thirds
NAMES = [f"{c}-" + "é" * 5_000 for c in range(2)]


def crowded_store(root: Path) -> Path:
    """Two polls of one Key_Shared subscription: two long-named consumers taking turns over
    single-hash ranges, each draining RANGES hashes."""
    store = Store(root)
    consumers = tuple(
        ConsumerRecord(
            TOPIC,
            "ks",
            name,
            connected_since=at(-60 + c),
            hash_ranges=tuple((h, h) for h in range(1 + c, 1 + 2 * RANGES, 2)),
        )
        for c, name in enumerate(NAMES)
    )
    sub = SubscriptionRecord(TOPIC, "ks", type="Key_Shared", consumer_count=2)
    for i in range(2):
        draining = tuple(
            DrainingHashRecord(TOPIC, "ks", NAMES[c], h, 2, 1 + i)
            for c in range(2)
            for h in range(2 - c, 1 + 2 * RANGES, 2)
        )
        snapshot = make_snapshot(
            i * 30.0, subscriptions=(sub,), consumers=consumers, draining_hashes=draining
        )
        store.write(snapshot)
    return root


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return crowded_store(tmp_path_factory.mktemp("store"))


def texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


@pytest.mark.parametrize(
    ("slug", "frame"), [("key-shared-map", "ranges"), ("stuck-hashes", "hashes")]
)
def test_analyze_json_is_bounded_and_says_what_it_cut(
    store_dir: Path, slug: str, frame: str
) -> None:
    done = run_lens("analyze", slug, "--json", "--store", str(store_dir), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # 1,000 rows per frame, names cut to 1,000 characters (each "é" printed as \u00e9); whole,
    # the ranges alone would print 5,000 rows of 30,000 bytes of name
    assert len(done.stdout) < 20_000_000
    printed = json.loads(done.stdout)
    cut = printed["cut"]
    assert (cut["max_rows"], cut["max_text"]) == (1000, 1000)
    assert cut["frames_rows"][frame] >= 2 * RANGES
    assert len(printed["frames"][frame]) == 1000
    assert cut["texts_shortened"] > 0
    assert max(len(t) for t in texts(printed)) <= 1000
    shown = {r["consumer_name"] for r in printed["frames"][frame]}
    assert shown <= {n[:999] + "…" for n in NAMES}


def test_analyze_text_is_bounded_and_says_what_it_cut(store_dir: Path) -> None:
    done = run_lens("analyze", "stuck-hashes", "--store", str(store_dir), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout) < 8_000_000
    assert "cut (--max-rows, --max-text; 0 shows all): hashes: first 1000 of" in done.stdout


def test_bounds_of_zero_show_everything() -> None:
    frame = pd.DataFrame({"consumer_name": ["x" * 5000] * 3000, "hash": range(3000)})
    cut = Cut(0, 0)
    assert bounded_frame("f", frame, cut).equals(frame)
    assert cut.said() == ""
