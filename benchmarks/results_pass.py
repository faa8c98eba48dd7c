"""The `pass` and `kept` cases of `benchmarks/analyses.py --topics`.

`pass`: a whole results pass of the built-ins, as the collect process runs it after a poll
(`compute_results`), old and new one after the other: old with incident-timeline's and
key-shared-map's implementations of before they were vectorised
(tests/plugins/reference_incident_timeline.py, reference_key_shared_map.py), incident-timeline
and bundle-ownership over their whole windows (reference_timeline_window.py,
reference_bundle_window.py), no window cut from a longer one (each read on its own; equal
windows shared, as since `pulsar_lens.plugins.sharedreads` came) and every table read sorted
by time; new as it is, as a first pass (every step computed, none kept yet).

`kept`: what the stored results cost once a collect process has kept KEEP_LIGHT_RESULTS of each
light plugin: the pass's pruning (every entry's meta.json read) and one read of each plugin's
newest result (as a `/metrics` scrape or a page makes), old with every param's allowed values
inside meta.json, new with the long lists beside it (`results.CHOICES`)."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.measuring import clock, same_result
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import results as results_module
from pulsar_lens.plugins import steps as steps_module
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.precompute import (
    KEEP_LIGHT_RESULTS,
    compute_results,
    requirements_first,
)
from pulsar_lens.plugins.registry import discover, instance_of
from pulsar_lens.plugins.results import RESULTS_DIR, ResultStore, StoredResult
from pulsar_lens.plugins.runner import snapshot_window, validate_params
from pulsar_lens.plugins.steps import STEPS_DIR

read_steps = steps_module._read


class CountedStore(Store):
    """The store, counting the table reads made through it."""

    reads = 0

    def read(self, name: str, **window: Any) -> pa.Table:
        self.reads += 1
        return super().read(name, **window)


def _stored(root: Path, light: Sequence[Any]) -> dict[str, Any]:
    """What a pass stored for each plugin, read back."""
    store, results = Store(root), ResultStore(root)
    stored = {}
    for plugin in light:
        instance = instance_of(plugin)
        params = validate_params(instance, None).model_dump(mode="json")
        ids = [str(s) for s in snapshot_window(instance, store)["snapshot_id"]]
        stored[instance.name] = results.read(instance.name, instance.version, params, ids)
    return stored


def _same_stored(new: dict[str, Any], old: dict[str, Any]) -> str:
    for name, was in old.items():
        now = new[name]
        if (now.status, now.error) != (was.status, was.error):
            raise AssertionError(f"{name}: {now.status} {now.error} != {was.status} {was.error}")
        if was.result is not None:
            same_result(now.result, was.result)
    return "equal"


@contextmanager
def old_pass() -> Iterator[None]:
    """The pass as it was before incident-timeline's and key-shared-map's analyses were
    vectorised, incident-timeline and bundle-ownership compared their whole windows at every
    pass instead of keeping steps, a window inside a longer one was cut from it and a read
    already in time order was left unsorted."""
    from pulsar_lens.core import store as store_module
    from pulsar_lens.plugins import sharedreads
    from pulsar_lens.plugins.builtin.key_shared_map import frames
    from tests.plugins import (
        reference_bundle_window,
        reference_incident_timeline,
        reference_key_shared_map,
    )
    from tests.plugins.swaps import swapped

    swaps = [
        *reference_incident_timeline.REPLACED,
        *reference_bundle_window.WHOLE_WINDOW,
        (frames, "_model_columns", reference_key_shared_map.model_columns),
        (sharedreads, "containing_reads", lambda keys: {}),
        (store_module, "by_time", lambda table: table.sort_by([("collected_at", "ascending")])),
    ]
    with swapped(swaps):
        yield


def pass_case(root: Path) -> list[str]:
    """A whole results pass of the built-ins (`compute_results`: the light ones), old
    (`old_pass`) and new, one after the other; stored results equal."""
    plugins = list(discover(entry_points=False))
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]

    def before(store: Store, results: ResultStore) -> None:
        with old_pass():
            compute_results(store, plugins, results=results)

    by_steps = 0  # the new pass's reads of step tables (`plugins.steps`), counted apart

    def now(store: Store, results: ResultStore) -> None:
        from tests.plugins.swaps import swapped

        def counted(plugin: Any, view: Any, ids: Sequence[str]) -> Any:
            nonlocal by_steps
            by_steps += len(plugin.step_inputs)
            return read_steps(plugin, view, ids)

        with swapped([(steps_module, "_read", counted)]):
            compute_results(store, plugins, results=results)

    figures, stored, reads = {}, {}, {}
    for side, step in (("old", before), ("new", now)):
        shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
        shutil.rmtree(root / STEPS_DIR, ignore_errors=True)  # a first pass: no step kept
        store = CountedStore(root)
        _, *figures[side] = clock(lambda s=store, f=step: f(s, ResultStore(root)))
        stored[side], reads[side] = _stored(root, light), store.reads
    shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
    (ow, oc), (nw, nc) = figures["old"], figures["new"]
    return [
        f"whole results pass ({len(light)} light plugins): results "
        + _same_stored(stored["new"], stored["old"]),
        f"  pass     old {ow:7.2f} s wall {oc:7.2f} s CPU   new {nw:7.2f} s wall {nc:7.2f} s "
        f"CPU   CPU ratio {oc / max(nc, 1e-9):6.1f}   table reads {reads['old']} -> {reads['new']} "
        f"({by_steps} of them by steps)",
    ]


def kept_case(root: Path, kept: int = KEEP_LIGHT_RESULTS) -> list[str]:
    """Pruning and reading the stored results once `kept` entries of each light plugin are
    stored, old (every list of choices inside meta.json) and new; every entry read back equal."""
    plugins = list(discover(entry_points=False))
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]
    shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
    compute_results(Store(root), plugins, results=ResultStore(root))
    newest: dict[str, StoredResult] = _stored(root, light)
    figures, sizes = {}, {}
    for side, inline in (("old", sys.maxsize), ("new", results_module.INLINE_CHOICES)):
        results = ResultStore(root / f"kept-{side}")
        saved, results_module.INLINE_CHOICES = results_module.INLINE_CHOICES, inline
        try:
            for stored in newest.values():
                for i in range(kept):  # as many polls' results: another newest snapshot each
                    ids = (*stored.snapshot_ids[:-1], f"{stored.snapshot_ids[-1]}~{i}")
                    results.write(dataclasses.replace(stored, snapshot_ids=ids))
        finally:
            results_module.INLINE_CHOICES = saved
        sizes[side] = sum(p.stat().st_size for p in results.root.rglob("*") if p.is_file())

        def prune_and_read(results: ResultStore = results) -> list[StoredResult | None]:
            for name in newest:
                results.keep_newest(name, kept)  # reads every meta.json, removes none
            return [
                results.newest(s.plugin, s.version, s.params) for s in newest.values()
            ]  # as a scrape or a page reads the newest

        back, *figures[side] = clock(prune_and_read)
        for was, now in zip(newest.values(), back, strict=True):
            if now is None or now.choices != was.choices:
                raise AssertionError(f"{was.plugin}: its stored choices did not read back")
        shutil.rmtree(results.root.parent)
    shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
    (ow, oc), (nw, nc) = figures["old"], figures["new"]
    return [
        f"{kept} kept results of each of {len(light)} light plugins: results equal",
        f"  kept     old {ow:7.2f} s wall {oc:7.2f} s CPU   new {nw:7.2f} s wall {nc:7.2f} s "
        f"CPU   CPU ratio {oc / max(nc, 1e-9):6.1f}   "
        f"MB on disk {sizes['old'] / 1e6:.1f} -> {sizes['new'] / 1e6:.1f}",
    ]
