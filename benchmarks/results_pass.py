"""The `pass` case of `benchmarks/analyses.py --topics`: a whole results pass of the built-ins,
as the collect process runs it after a poll (`compute_results`), old and new one after the
other: old with incident-timeline's and key-shared-map's implementations of before they were
vectorised (tests/plugins/reference_incident_timeline.py, reference_key_shared_map.py), no
window cut from a longer one (each read on its own; equal windows shared, as since
`pulsar_lens.plugins.sharedreads` came) and every table read sorted by time; new as it is."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.measuring import clock, same_result
from pulsar_lens.core.store import Store
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.precompute import (
    compute_results,
    requirements_first,
)
from pulsar_lens.plugins.registry import discover, instance_of
from pulsar_lens.plugins.results import RESULTS_DIR, ResultStore
from pulsar_lens.plugins.runner import snapshot_window, validate_params


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
    vectorised, a window inside a longer one was cut from it and a read already in time
    order was left unsorted."""
    from pulsar_lens.core import store as store_module
    from pulsar_lens.plugins import sharedreads
    from pulsar_lens.plugins.builtin.incident_timeline import clients
    from pulsar_lens.plugins.builtin.key_shared_map import frames
    from tests.plugins import reference_incident_timeline, reference_key_shared_map

    swaps = [
        (clients, "backlog_rows", reference_incident_timeline.backlog_rows),
        (clients, "reconnect_rows", reference_incident_timeline.reconnect_rows),
        (clients, "NewestTypes", reference_incident_timeline.AllTypes),
        (frames, "_model_columns", reference_key_shared_map.model_columns),
        (sharedreads, "containing_reads", lambda keys: {}),
        (store_module, "by_time", lambda table: table.sort_by([("collected_at", "ascending")])),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, old in swaps:
            setattr(module, name, old)
        yield
    finally:
        for module, name, new in saved:
            setattr(module, name, new)


def pass_case(root: Path) -> list[str]:
    """A whole results pass of the built-ins (`compute_results`: the light ones), old
    (`old_pass`) and new, one after the other; stored results equal."""
    plugins = list(discover(entry_points=False))
    light = [p for p in requirements_first(plugins) if engine_of(p).per_poll]

    def before(store: Store, results: ResultStore) -> None:
        with old_pass():
            compute_results(store, plugins, results=results)

    def now(store: Store, results: ResultStore) -> None:
        compute_results(store, plugins, results=results)

    figures, stored, reads = {}, {}, {}
    for side, step in (("old", before), ("new", now)):
        shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
        store = CountedStore(root)
        _, *figures[side] = clock(lambda s=store, f=step: f(s, ResultStore(root)))
        stored[side], reads[side] = _stored(root, light), store.reads
    shutil.rmtree(root / RESULTS_DIR, ignore_errors=True)
    (ow, oc), (nw, nc) = figures["old"], figures["new"]
    return [
        f"whole results pass ({len(light)} light plugins): results "
        + _same_stored(stored["new"], stored["old"]),
        f"  pass     old {ow:7.2f} s wall {oc:7.2f} s CPU   new {nw:7.2f} s wall {nc:7.2f} s "
        f"CPU   CPU ratio {oc / max(nc, 1e-9):6.1f}   table reads {reads['old']} -> {reads['new']}",
    ]
