"""The engines a plugin runs on: one object per kind holds all that differs between them.

A plugin declares its engine by name (`engine = "spark"`, one of `pulsar_lens.api.ENGINES`);
`engine_of(plugin)` is the object that says, for that kind:

- how its inputs load (`load_inputs`: pandas frames read through pyarrow, with the results of
  the plugins it requires; or Spark DataFrames over its window of the store on disk);
- where it runs (`per_poll`: analysed with default parameters by the collect process after
  each poll, or only as a job, in the job worker or `pulsar-lens analyze`; `in_process`: the
  hooks that run in the calling process even for an isolated plugin);
- what the dashboard gives it (`section`: where its own page goes; `run_control`: how its
  page obtains the views, analysed for the chosen params or read from a job with Run now);
- how `/metrics` reads it (`per_poll` again: the result stored for the newest poll, whose
  failure counts even without a `metrics` hook, or the newest stored job result, nothing
  before the first job).

Nothing else compares engine names; a test scans the code for it. pyspark is not imported
here: the Spark engine imports its loader only when it loads inputs.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import pandas as pd

from pulsar_lens.api import AnalysisPlugin, BaseModel, Inputs, Result, SparkInputs
from pulsar_lens.core.errors import PluginRunError
from pulsar_lens.plugins.window import SnapshotStore, read_tables

__all__ = ["BY_NAME", "LIGHT", "SPARK", "Engine", "RunControl", "engine_of"]

RunControl = Literal["live", "job"]
"""`live`: the page analyses the plugin for the chosen params (reading the stored result of
the newest poll for the default ones). `job`: the page shows the newest stored result and a
Run now button that queues a job, with its progress; no page request starts the engine."""


@dataclass(frozen=True)
class Engine:
    """One kind of engine; `LIGHT` and `SPARK` are the two there are."""

    name: str
    per_poll: bool
    """True: the collect process analyses the plugin after every poll and stores the result
    under that poll's window; pages, `/metrics` and the CLI read it (or analyse on demand).
    False: it is analysed only as a job; readers get its newest stored result and never start
    the engine (`ResultNotReady` before the first job)."""
    in_process: frozenset[str]
    """Hooks that run in the calling process even for an isolated plugin: a Spark plugin's
    `analyze` and `param_choices` need the session of the process running the job."""
    section: str
    """The dashboard section that holds a page of the plugin's own (`pulsar_lens.api.Page`)."""
    run_control: RunControl
    needs: str | None = None
    """A module the engine needs installed; a plugin on it is refused at load time without."""

    def missing(self) -> str | None:
        """Why a plugin on this engine cannot load here, or None when it can."""
        if self.needs is None or importlib.util.find_spec(self.needs) is not None:
            return None
        return (
            f"{self.name!r} needs {self.needs}, which is not installed (a light image, or an "
            "install without its dependencies: pip install pulsar-lens installs it)"
        )

    def load_inputs(
        self,
        plugin: AnalysisPlugin,
        store: SnapshotStore,
        window: pd.DataFrame,
        results: Callable[[], Mapping[str, Result]],
        params: BaseModel | None = None,
    ) -> Inputs | SparkInputs:
        """What `analyze` receives over `window` (index rows, oldest first) with `params`
        (the default ones when None: they set the polls a `history_param` plugin reads).
        `results` gives the results of the plugins it requires, called only by an engine that
        hands them on."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Light(Engine):
    def load_inputs(
        self,
        plugin: AnalysisPlugin,
        store: SnapshotStore,
        window: pd.DataFrame,
        results: Callable[[], Mapping[str, Result]],
        params: BaseModel | None = None,
    ) -> Inputs:
        required = results()
        tables = read_tables(plugin, store, window, params)
        return Inputs(tables=tables, snapshots=window, results=required)


@dataclass(frozen=True)
class _Spark(Engine):
    def load_inputs(
        self,
        plugin: AnalysisPlugin,
        store: SnapshotStore,
        window: pd.DataFrame,
        results: Callable[[], Mapping[str, Result]],
        params: BaseModel | None = None,
    ) -> SparkInputs:
        from pulsar_lens.plugins.spark.inputs import load_spark_inputs  # pyspark: only now

        root = getattr(store, "root", None)
        if not isinstance(root, str | os.PathLike):
            raise PluginRunError(plugin.name, "a Spark analysis reads a store on disk")
        return load_spark_inputs(plugin, root, window)


LIGHT: Engine = _Light(
    name="light", per_poll=True, in_process=frozenset(), section="Cluster", run_control="live"
)
SPARK: Engine = _Spark(
    name="spark",
    per_poll=False,
    in_process=frozenset({"analyze", "param_choices"}),
    section="History",
    run_control="job",
    needs="pyspark",
)
BY_NAME: Mapping[str, Engine] = {engine.name: engine for engine in (LIGHT, SPARK)}
"""Every engine by the name a plugin declares (`pulsar_lens.api.ENGINES` lists the names)."""


class Declares(Protocol):
    """A plugin, its class or a `LoadedPlugin`: each says its engine's name."""

    @property
    def engine(self) -> str: ...


def engine_of(plugin: Declares) -> Engine:
    """The engine the plugin declared; validation refuses any other name, so only a plugin
    that was never validated raises KeyError here."""
    return BY_NAME[plugin.engine]
