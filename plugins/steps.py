"""Steps: what each poll says against the poll before it, computed once and kept.

A light plugin that compares consecutive polls over a long window (who reconnected, which
backlog crossed a threshold) used to read the whole window of its tables every pass and
compare all of it again, though only the newest poll was new: at 100,000 topics, 60 polls of
consumers and subscriptions read, converted and compared after every poll. A plugin that
declares `step_inputs` instead has its `step` called for each poll of its window with that
poll and the one before it (the window's first poll alone), and its `analyze` reads every
poll's step frames (`Inputs.steps`).

Each step is kept under `steps/<slug>/<key>/` of the store, in the stored results' layout
(`plugins.results`) with its frames as Arrow IPC files (every pass reads a full window's
steps back: some 900 small files at 100,000 topics), keyed by the plugin, its version, the
params and the one or two snapshot ids it read (the params: only the `step_params` fields);
the results pass writes them (`keep`), every reader reads them. A pass then computes two
steps (the newest poll, and the window's new first poll alone) and reads the others back.
Missing steps (a first pass, a restart, other params) are computed from the store `CHUNK`
polls at a time, so a cold pass never holds the whole window of those tables.

Every step frame goes through Arrow whether it was just computed or read back, so `analyze`
sees the same dtypes either way (a frame Arrow cannot hold fails the plugin, saying so).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.core.arrowframes import table_frame
from pulsar_lens.core.errors import PluginContractError
from pulsar_lens.plugins.calls import step as call_step
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.results import ResultStore, StoredResult
from pulsar_lens.plugins.window import SnapshotStore, TableRead, keep_columns

log = logging.getLogger(__name__)

STEPS_DIR = "steps"
CHUNK = 8
"""Polls of the step tables read at once when steps are missing: a cold pass holds this many
polls of them, not the whole window."""

Plugin = AnalysisPlugin | LoadedPlugin
Pair = tuple[str, ...]
"""The snapshot ids one step reads: (the poll before, the poll), or (the window's first poll,)."""


def stepped(plugin: Plugin) -> bool:
    """Whether the plugin has steps (declares `step_inputs`)."""
    return bool(instance_of(plugin).step_inputs)


def step_store(store: SnapshotStore) -> ResultStore | None:
    """Where the steps of a store on disk are kept (None for stores without a folder)."""
    root = getattr(store, "root", None)
    return None if root is None else ResultStore(root, folder=STEPS_DIR, frame_format="arrow")


def pairs_of(plugin: Plugin, index: pd.DataFrame) -> list[Pair]:
    """The steps of the plugin's window (its newest `history` polls of `index`), oldest first."""
    history = instance_of(plugin).history
    ids = [str(s) for s in index["snapshot_id"]][-history:] if len(index) else []
    return [tuple(ids[max(0, i - 1) : i + 1]) for i in range(len(ids))]


def with_steps(
    plugin: Plugin,
    inputs: Any,
    params: BaseModel,
    *,
    store: SnapshotStore | None = None,
    keep: bool = False,
) -> Any:
    """`inputs` with every step of the window (`Inputs.stepped`), for a plugin that has steps;
    other inputs as they are.

    With `store`, the kept steps are read and the missing ones computed from the store's
    tables (and kept, with `keep`); without, all are computed from the tables `inputs` holds
    (`Inputs.step_tables`, which `runner.load_inputs` reads, or else `Inputs.tables`: they
    must then hold the `step_inputs` over the window)."""
    if not stepped(plugin) or not isinstance(inputs, Inputs) or inputs.stepped is not None:
        return inputs
    instance = instance_of(plugin)
    pairs = pairs_of(plugin, inputs.snapshots)
    params_json = step_key_params(instance, params)
    kept = step_store(store) if store is not None else None
    found: dict[Pair, dict[str, pa.Table]] = {}
    if kept is not None:
        for pair in pairs:
            tables = kept.read_tables(instance.name, instance.version, params_json, pair)
            # one of other frames (kept by other code of this version) is computed again
            if tables is not None and set(tables) == set(instance.step_outputs):
                found[pair] = tables
    missing = [place for place, pair in enumerate(pairs) if pair not in found]
    read = _from_store(instance, store) if store is not None else _from_inputs(instance, inputs)
    for chunk in _chunks(pairs, missing):
        rows_of = read(_ids_of(chunk))
        for pair in chunk:
            started = time.perf_counter()
            data = Inputs(tables=rows_of(pair), snapshots=_index_of(inputs.snapshots, pair))
            found[pair] = _as_tables(instance, call_step(plugin, data, params))
            if keep and kept is not None:
                seconds = time.perf_counter() - started
                _keep(kept, instance, params_json, pair, found[pair], seconds)
    stepped_frames = {
        name: _concat([found[pair][name] for pair in pairs]) for name in instance.step_outputs
    }
    return dataclasses.replace(inputs, stepped=stepped_frames, step_tables=None)


def step_key_params(plugin: AnalysisPlugin, params: BaseModel) -> dict[str, Any]:
    """The params a kept step is filed under: the `step_params` fields only."""
    values = params.model_dump(mode="json")
    return {name: values[name] for name in plugin.step_params}


def step_tables(
    plugin: AnalysisPlugin, store: SnapshotStore, index: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The `step_inputs` over the plugin's whole window of `index`, as `with_steps` without a
    store computes every step from (none for a plugin without steps)."""
    if not plugin.step_inputs:
        return {}
    ids = [sid for pair in pairs_of(plugin, index) for sid in pair[-1:]]
    return {name: table.to_pandas() for name, table in _read(plugin, store, ids).items()}


def prune_steps(
    store: SnapshotStore, plugins: Sequence[Plugin], index: pd.DataFrame | None = None
) -> int:
    """Delete the kept steps no plugin's window holds any more (each cluster's newest
    `history` polls of the store's `index`, read when not given); how many went."""
    kept = step_store(store)
    if kept is None:
        return 0
    index = store.snapshots() if index is None else index
    removed = 0
    for plugin in plugins:
        if not stepped(plugin):
            continue
        instance = instance_of(plugin)
        live: set[str] = set()
        if len(index):
            by_cluster = "cluster" in index
            clusters = index.groupby("cluster", dropna=False, sort=False) if by_cluster else None
            for _, rows in clusters if clusters is not None else [(None, index)]:
                live.update(str(s) for s in rows["snapshot_id"].tail(instance.history))
        removed += kept.prune(live, plugin=instance.name)
    return removed


Rows = Callable[[Pair], dict[str, pd.DataFrame]]
"""The rows of each step table of one step's polls."""


def _read(plugin: AnalysisPlugin, store: SnapshotStore, ids: Sequence[str]) -> dict[str, pa.Table]:
    """The step tables over `ids`, as Arrow tables."""
    tables = {}
    for name in plugin.step_inputs:
        columns = plugin.columns_of.get(name)
        tables[name] = keep_columns(TableRead(name, tuple(ids), None, columns).load(store), columns)
    return tables


def _from_store(plugin: AnalysisPlugin, store: SnapshotStore) -> Callable[[Sequence[str]], Rows]:
    """Each chunk's polls read at once; a step's rows cut from them in Arrow (a pandas
    filter of text columns copies them one by one: a second a step at 100,000 topics).

    Each row's poll is numbered once per read (its place in `ids`), and a step's rows are
    picked by those numbers: comparing every row's snapshot id text again for each step was
    3 s of a pass at 1,000,000 topics. A step that reads every poll read (the one new step
    of a pass after each poll) takes the tables as they are."""

    def read(ids: Sequence[str]) -> Rows:
        tables = _read(plugin, store, ids)
        read_ids = list(dict.fromkeys(ids))
        places = pa.array(read_ids, pa.string())
        numbered = {
            name: pc.index_in(table["snapshot_id"], value_set=places)
            for name, table in tables.items()
            if len(read_ids) > 2
        }

        def rows_of(pair: Pair) -> dict[str, pd.DataFrame]:
            if set(read_ids) <= set(pair):
                return {name: table_frame(table) for name, table in tables.items()}
            wanted = pa.array([read_ids.index(sid) for sid in pair if sid in read_ids], pa.int32())
            return {
                name: table_frame(table.filter(_of_polls(table, numbered.get(name), wanted, pair)))
                for name, table in tables.items()
            }

        return rows_of

    return read


def _of_polls(
    table: pa.Table, numbers: pa.ChunkedArray | None, wanted: pa.Array, pair: Pair
) -> pa.ChunkedArray:
    """Which rows of `table` are of `pair`'s polls: by their numbers when given, else by
    their snapshot ids."""
    if numbers is not None:
        return pc.is_in(numbers, value_set=wanted)
    return pc.is_in(table["snapshot_id"], value_set=pa.array(list(pair), pa.string()))


def _from_inputs(plugin: AnalysisPlugin, inputs: Inputs) -> Callable[[Sequence[str]], Rows]:
    tables = inputs.step_tables if inputs.step_tables is not None else inputs.tables
    absent = [name for name in plugin.step_inputs if name not in tables]
    if absent:
        raise PluginContractError(
            plugin.name,
            f"its steps read {', '.join(absent)}, which these inputs do not hold "
            "(runner.load_inputs reads the step_inputs too)",
        )

    def read(ids: Sequence[str]) -> Rows:
        chunk = {name: _rows_of(tables[name], tuple(ids)) for name in plugin.step_inputs}
        return lambda pair: {name: _rows_of(frame, pair) for name, frame in chunk.items()}

    return read


def _chunks(pairs: Sequence[Pair], missing: Sequence[int]) -> Iterator[list[Pair]]:
    """The missing steps (their places in `pairs`, ascending) in runs of at most CHUNK
    neighbours, each run's polls read together. Steps apart are read apart: a pass after a
    poll misses the window's first step and its newest, and reading their three polls at once
    meant picking each one's rows out of all three (at 100,000 topics, a full window's steps
    of the four built-ins took 2.46 s with that, 2.22 s without)."""
    run: list[Pair] = []
    last = -2
    for place in missing:
        if run and (len(run) == CHUNK or place != last + 1):
            yield run
            run = []
        run.append(pairs[place])
        last = place
    if run:
        yield run


def _ids_of(pairs: Sequence[Pair]) -> list[str]:
    return list(dict.fromkeys(sid for pair in pairs for sid in pair))


def _rows_of(frame: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    if "snapshot_id" not in frame:
        return frame.iloc[0:0]
    mine = frame["snapshot_id"].isin(pair).to_numpy(dtype=bool, na_value=False)
    return frame[mine].reset_index(drop=True)


def _index_of(snapshots: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    rows = snapshots[snapshots["snapshot_id"].astype(str).isin(pair)]
    return rows.reset_index(drop=True)


def _as_tables(plugin: AnalysisPlugin, result: Result) -> dict[str, pa.Table]:
    """The step's frames as Arrow tables, as they are kept: a step read back and one just
    computed give `analyze` the same dtypes."""
    tables = {}
    for name, frame in result.frames.items():
        try:
            tables[name] = pa.Table.from_pandas(frame, preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise PluginContractError(
                plugin.name, f"step frame {name!r} cannot be kept: {type(exc).__name__}: {exc}"
            ) from exc
    return tables


def _keep(
    kept: ResultStore,
    plugin: AnalysisPlugin,
    params: Mapping[str, Any],
    pair: Pair,
    tables: Mapping[str, pa.Table],
    seconds: float,
) -> None:
    result = Result(frames={name: table.to_pandas() for name, table in tables.items()})
    stored = StoredResult(
        plugin=plugin.name,
        version=plugin.version,
        params=params,
        snapshot_ids=pair,
        status="ok",
        seconds=seconds,
        result=result,
    )
    try:
        kept.write(stored)
    except Exception as exc:  # a step not kept is computed again by the next pass
        log.warning("could not keep a step of %s: %s", plugin.name, exc)


def _concat(tables: Sequence[pa.Table]) -> pd.DataFrame:
    """The tables one after the other, as one frame; empty ones add nothing (nor their
    dtypes). Tables of one schema (the pandas dtypes they were made of too, no dictionary
    columns) are joined in Arrow and converted once, which gives the frame that converting
    each and concatenating in pandas gives (a converted table costs a millisecond however
    small: sixty polls' steps of six frames each, every pass); others go through pandas."""
    full = [table for table in tables if table.num_rows]
    if not full:
        return tables[0].to_pandas() if tables else pd.DataFrame()
    if len(full) == 1:
        return table_frame(full[0])
    if all(_same_kind(full[0], table) for table in full[1:]):
        return table_frame(pa.concat_tables(full))
    return pd.concat([table.to_pandas() for table in full], ignore_index=True)


def _same_kind(first: pa.Table, other: pa.Table) -> bool:
    if not other.schema.equals(first.schema):
        return False
    if any(pa.types.is_dictionary(field.type) for field in first.schema):
        return False  # categories of each table: pandas joins them otherwise than Arrow
    columns = [(t.schema.pandas_metadata or {}).get("columns") for t in (first, other)]
    return columns[0] == columns[1]
