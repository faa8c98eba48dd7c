"""Probe targets: spec parsing, the bundles a spec picks from a poll, probe topic names."""

from __future__ import annotations

import itertools

import pytest

from pulsar_lens.collectors.probe import ProbeSettings, probe_topic
from pulsar_lens.collectors.probe_loop import parse_probe_spec, resolve_targets
from pulsar_lens.core.bundles import default_boundaries, parse_bundle_name, topic_bundle
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.model import BundleRecord


def records(namespace: str, n: int) -> list[BundleRecord]:
    bounds = default_boundaries(n)
    return [
        BundleRecord(namespace, namespace.split("/")[0], f"0x{lo:08x}_0x{hi:08x}", lo, hi)
        for lo, hi in itertools.pairwise(bounds)
    ]


def test_specs_name_a_namespace_or_one_bundle() -> None:
    assert parse_probe_spec("public/default") == ("public/default", None)
    assert parse_probe_spec("public/default/0x00000000_0x40000000") == (
        "public/default",
        "0x00000000_0x40000000",
    )
    for bad in ("public", "public/default/nope", "a/b/c/d", ""):
        with pytest.raises(ModelError):
            parse_probe_spec(bad)


def test_targets_are_picked_from_the_polled_bundles_once_each() -> None:
    polled = records("public/default", 4) + records("t/other", 2)
    picked = resolve_targets(
        ["public/default", "public/default/0x00000000_0x40000000", "t/none"], polled
    )
    assert [t.bundle for t in picked] == [r.bundle for r in polled[:4]]


@pytest.mark.parametrize("bundles", [1, 4, 16, 256])
def test_a_probe_topic_hashes_into_its_bundle(bundles: int) -> None:
    bounds = default_boundaries(bundles)
    for lo, hi in list(itertools.pairwise(bounds))[:8]:
        name = f"0x{lo:08x}_0x{hi:08x}"
        topic = probe_topic("public/default", name)
        assert topic_bundle(bounds, topic) == parse_bundle_name(name)


def test_probe_settings_refuse_nonsense() -> None:
    for bad in ({"rate": 0}, {"rate": 5000}, {"max_pending": 0}, {"receive_timeout": -1}):
        with pytest.raises(ValueError):
            ProbeSettings(**bad)  # type: ignore[arg-type]
