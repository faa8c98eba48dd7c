"""The plugin contract: the only module a plugin author imports.

A plugin is an `AnalysisPlugin` subclass declaring its metadata as class attributes, a
pydantic `Params` model, and two methods: `analyze(inputs, params) -> Result` (pure, frames in,
frames out) and `render(result) -> list[View]` (Altair charts, tables, metrics, notes, laid out
with sections, columns and tabs; never Streamlit). Optional: `metrics(result, context)` for
/metrics, and `page` for a page of its own in the dashboard. See docs/plugins.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import pandas as pd
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.core import Metric as MetricFamily
from pydantic import BaseModel, Field

# The model surface: what Pulsar does, as the built-ins use it (see docs/plugins.md):
# sticky-key hashing, Key_Shared selectors and their assignments, the failover active-consumer
# picker (modulo and PIP-392), the bundle of a topic, topic names as the broker parses them,
# and the sampled key load per consumer.
from pulsar_lens.core.assignments import Assignments, Consumer, diff_assignments
from pulsar_lens.core.bundles import (
    BundleRange,
    find_bundle,
    parse_bundles,
    topic_bundle,
    topic_bundles,
)
from pulsar_lens.core.failover import (
    OTHER_CHARSET,
    FailoverConsumer,
    JvmCharset,
    active_consumer_picker,
    compare_modes,
    jvm_charset,
    partition_index,
    select_active_consumer,
)
from pulsar_lens.core.hashing import (
    SelectorKind,
    sticky_key_hash,
    sticky_key_hash_array,
    topic_bundle_hash,
)
from pulsar_lens.core.keyload import compute_key_load
from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.core.model import HashRange
from pulsar_lens.core.selectors import ConsistentHashingSelector, make_selector
from pulsar_lens.core.topicname import TopicName, TopicNameError, parse_topic_name
from pulsar_lens.core.values import ENGINES

if TYPE_CHECKING:  # a plugin's render imports altair; discovering plugins does not
    import altair as alt

__all__ = [
    "API_VERSION",
    "ENGINES",
    "HISTORY_ALL",
    "OLDEST_API_VERSION",
    "OTHER_CHARSET",
    "PANELS",
    "AnalysisPlugin",
    "Assignments",
    "BaseModel",
    "BundleRange",
    "Chart",
    "Columns",
    "ConsistentHashingSelector",
    "Consumer",
    "CounterMetricFamily",
    "Engine",
    "FailoverConsumer",
    "Field",
    "GaugeMetricFamily",
    "HashRange",
    "Inputs",
    "JvmCharset",
    "Metric",
    "MetricFamily",
    "MetricsContext",
    "Note",
    "NoteLevel",
    "Page",
    "Result",
    "Section",
    "SelectorKind",
    "SparkInputs",
    "Table",
    "Tabs",
    "TopicName",
    "TopicNameError",
    "View",
    "active_consumer_picker",
    "compare_modes",
    "compute_key_load",
    "diff_assignments",
    "empty_frame",
    "escape_markdown",
    "find_bundle",
    "finite",
    "frame_of",
    "jvm_charset",
    "make_selector",
    "parse_bundles",
    "parse_topic_name",
    "partition_index",
    "select_active_consumer",
    "sticky_key_hash",
    "sticky_key_hash_array",
    "topic_bundle",
    "topic_bundle_hash",
    "topic_bundles",
]

API_VERSION = 1
"""The plugin API this version of Pulsar Lens offers. It goes up when the contract changes in a
way an older plugin cannot follow; a plugin declares the one it was written for in
`AnalysisPlugin.api_version`, and one written for a newer API is refused at load time."""

OLDEST_API_VERSION = 1
"""The oldest plugin API this version still runs; a plugin declaring an older one is refused."""

Engine = Literal["light", "spark"]
"""`light` runs `analyze` on pandas frames (`Inputs`); `spark` on Spark DataFrames
(`SparkInputs`), for analyses that read long history or many keys (docs/spark.md)."""


HISTORY_ALL = 1_000_000
"""A `history` that means every stored poll (retention bounds it): for Spark analyses of the
whole stored history."""

NoteLevel = Literal["info", "warning", "error"]

PANELS: tuple[str, ...] = ("unload-drill",)
"""The dashboard's own panels a plugin's `Page` may show above its views (`Page.panels`):
`unload-drill` unloads a chosen bundle and measures the outage (drawn only where mutations are
allowed; the collect process runs the drill). When it ends the page draws the plugin's views
again, now over the drill's probe rows and polls."""


@dataclass(frozen=True)
class Inputs:
    """What `analyze` receives: each declared table over its last `history` snapshots (or
    `history_of[table]`).

    Every table row carries `snapshot_id`, `collected_at` (UTC) and `cluster`. `snapshots` holds
    the store's index rows of the widest window, oldest first (`snapshot_id`, `collected_at`,
    `cluster`, `partial`, ...); its last row is the newest snapshot. `results` holds, by slug,
    the default-parameter result of each plugin named in `requires`, for the same newest
    snapshot.
    """

    tables: Mapping[str, pd.DataFrame]
    snapshots: pd.DataFrame
    results: Mapping[str, Result] = field(default_factory=dict)

    def latest_snapshot_id(self) -> str | None:
        """The id of the newest snapshot, or None when there is none."""
        return _newest_id(self.snapshots)

    def history(self, name: str) -> pd.DataFrame:
        """All rows of table `name` (every snapshot in the window)."""
        return _declared(self.tables, name, "table", "inputs")

    def result(self, slug: str) -> Result:
        """The default-parameter result of plugin `slug`, one of those in `requires`."""
        return _declared(self.results, slug, "plugin", "requires")

    def latest(self, name: str) -> pd.DataFrame:
        """Rows of table `name` that belong to the newest snapshot only."""
        frame = self.history(name)
        newest = self.latest_snapshot_id()
        if newest is None or "snapshot_id" not in frame:
            return frame.iloc[0:0]
        return frame[frame["snapshot_id"] == newest].reset_index(drop=True)


T = TypeVar("T")


def _newest_id(snapshots: pd.DataFrame) -> str | None:
    if len(snapshots) and "snapshot_id" in snapshots:
        return str(snapshots["snapshot_id"].iloc[-1])
    return None


def _declared(found: Mapping[str, T], name: str, kind: str, where: str) -> T:
    """found[name], or a KeyError naming what the plugin declared in `where`."""
    try:
        return found[name]
    except KeyError:
        known = ", ".join(sorted(found)) or "none"
        raise KeyError(f"{kind} {name!r} was not declared in {where}; declared: {known}") from None


@dataclass(frozen=True)
class SparkInputs:
    """What a Spark plugin's `analyze` receives: one Spark DataFrame per declared table, read
    from the store over the window of its last `history` snapshots, listing only the day
    folders inside it.

    `snapshots` is the store's index of that window as a small pandas frame, oldest first;
    `since` and `until` are the collection times of its first and last snapshot. `analyze`
    returns a `Result` of small pandas frames (aggregates brought back with `toPandas()`),
    stored and drawn like any plugin's.
    """

    tables: Mapping[str, Any]
    snapshots: pd.DataFrame
    since: Any = None
    until: Any = None

    def latest_snapshot_id(self) -> str | None:
        """The id of the newest snapshot, or None when there is none."""
        return _newest_id(self.snapshots)

    def history(self, name: str) -> Any:
        """The Spark DataFrame of table `name` over the whole window."""
        return _declared(self.tables, name, "table", "inputs")

    def latest(self, name: str) -> Any:
        """The rows of table `name` that belong to the newest snapshot only."""
        frame = self.history(name)
        return frame.filter(frame["snapshot_id"] == (self.latest_snapshot_id() or ""))


@dataclass(frozen=True)
class Result:
    """What `analyze` returns: exactly the declared output frames, plus small JSON-able facts."""

    frames: Mapping[str, pd.DataFrame]
    summary: Mapping[str, Any] = field(default_factory=dict)


# Text and Markdown in views: titles, labels, tab labels and metric values are shown as text,
# names in them as they are; captions, notes and metric help are Markdown, so a name a cluster
# chose goes into them through `escape_markdown` (or it could be a link, an image, HTML).


@dataclass(frozen=True)
class Chart:
    """An Altair chart (any top-level chart: `alt.Chart`, layers, concatenations)."""

    chart: alt.TopLevelMixin
    title: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Table:
    """A frame shown as a table."""

    frame: pd.DataFrame
    title: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Metric:
    """One headline number."""

    label: str
    value: str | int | float
    delta: str | None = None
    help: str | None = None


@dataclass(frozen=True)
class Note:
    """A paragraph of Markdown, optionally as a warning or an error; names in it go through
    `escape_markdown`."""

    markdown: str
    level: NoteLevel = "info"


@dataclass(frozen=True)
class Section:
    """A heading that starts a part of the page, with an optional caption under it."""

    title: str
    caption: str = ""


@dataclass(frozen=True)
class Columns:
    """Views side by side: one sequence of views per column, `widths` relative (equal if empty)."""

    columns: Sequence[Sequence[View]]
    widths: Sequence[float] = ()


@dataclass(frozen=True)
class Tabs:
    """Alternative views of the same thing, one tab each: (label, views) pairs, first shown."""

    tabs: Sequence[tuple[str, Sequence[View]]]


View = Chart | Table | Metric | Note | Section | Columns | Tabs
"""What `render` returns. `Section`, `Columns` and `Tabs` lay the others out on the page."""


@dataclass(frozen=True)
class Page:
    """A page of the plugin's own in the dashboard's Cluster section, beside the Overview.

    Without one, a plugin's views are shown on a generic page under Analyses. `controls` are
    `Params` fields drawn above the views (e.g. which subscription to show); the other fields
    stay in a "Parameters" expander. `url_path` defaults to the slug; `order` sorts the
    Cluster pages (smaller first). `panels` names dashboard panels (`PANELS`) drawn above the
    views, e.g. `("unload-drill",)` on a page about unloads.
    """

    title: str
    icon: str = ":material/analytics:"
    caption: str = ""
    controls: tuple[str, ...] = ()
    url_path: str = ""
    order: int = 100
    panels: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricsContext:
    """The bounds of what a plugin's `metrics()` may export, so a big cluster cannot blow up
    a scrape: per-subscription series only for `subscriptions` (the ones with the largest
    backlog, PULSAR_LENS_METRICS_MAX_SUBSCRIPTIONS of them, largest first), and at most
    `max_groups` series of any other per-object family."""

    subscriptions: tuple[tuple[str, str], ...] = ()
    max_groups: int = 500
    _kept: frozenset[tuple[str, str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_kept", frozenset(self.subscriptions))

    def keeps(self, topic: object, subscription: object) -> bool:
        return (str(topic), str(subscription)) in self._kept


def empty_frame(columns: Sequence[str]) -> pd.DataFrame:
    """A frame with these columns and no rows (object dtype), for an output with nothing in it."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def frame_of(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """Rows (dicts) as a frame of exactly these columns, in this order; `empty_frame` if none."""
    return pd.DataFrame(list(rows), columns=list(columns)) if rows else empty_frame(columns)


def finite(value: object) -> float | None:
    """A frame cell as a finite float, or None for a missing one (None, NaN, pd.NA)."""
    if value is None or value is pd.NA:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) or math.isinf(number) else number


class AnalysisPlugin:
    """Base class of every analysis; subclass it and declare the class attributes.

    `name` is a stable kebab-case slug (it appears in URLs, cache keys and stored results);
    `inputs` are table names from `core.model.TABLES`; `history` is how many recent snapshots
    the runner loads of each of them, and `history_of` sets another count for some tables
    (e.g. `{"key_samples": 12}` beside `history = 1`); `outputs` are the frame names `analyze`
    must return; `page` asks for a dashboard page of the plugin's own; `requires` are the
    slugs of plugins whose default-parameter result `analyze` reads (`Inputs.result`);
    `api_version` is the plugin API (`API_VERSION`) the plugin was written for.
    """

    api_version: ClassVar[int] = 1  # 1, not API_VERSION: a plugin that omits it predates it

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    version: ClassVar[str]
    engine: ClassVar[Engine] = "light"
    inputs: ClassVar[tuple[str, ...]]
    history: ClassVar[int] = 1
    history_of: ClassVar[Mapping[str, int]] = {}
    outputs: ClassVar[tuple[str, ...]]
    page: ClassVar[Page | None] = None
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(BaseModel):
        """No parameters; override with your own fields (they drive the dashboard form)."""

    def metrics(self, result: Result, context: MetricsContext) -> list[MetricFamily]:
        """Prometheus families for /metrics from a result of the default parameters.

        Optional. Names must start with `pulsar_lens_`; keep per-subscription series to
        `context.subscriptions` and other per-object series to `context.max_groups`.
        """
        return []

    def analyze(self, data: Inputs, params: Any) -> Result:
        """Compute the output frames from the input tables; pure, no I/O."""
        raise NotImplementedError(f"{type(self).__name__} does not implement analyze()")

    def render(self, result: Result, params: Any = None) -> list[View]:
        """Turn a result into views; no Streamlit calls. `params` are the validated `Params`
        the result was computed with (the defaults for a stored one). A render written
        with one argument, `render(self, result)`, is still called that way."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        """Allowed values of str params, taken from the data; the dashboard shows a selectbox."""
        return {}
