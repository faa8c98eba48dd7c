"""The values that cross the plugin contract: what `analyze` receives (`Inputs`, `SparkInputs`)
and returns (`Result`), the views `render` returns, a plugin's `Page`, the bounds of its
`metrics()` and small frame helpers. Plugin authors import them from `pulsar_lens.api`, which
re-exports every one; this module holds them so that the contract's base class reads apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import pandas as pd

if TYPE_CHECKING:  # a plugin's render imports altair; discovering plugins does not
    import altair as alt


NoteLevel = Literal["info", "warning", "error"]
T = TypeVar("T")

PANELS: tuple[str, ...] = ("unload-drill", "collector-health")
"""The dashboard's own panels a plugin's `Page` may show above its views (`Page.panels`):
`unload-drill` unloads a chosen bundle and measures the outage (drawn only where mutations are
allowed; the collect process runs the drill). When it ends the page draws the plugin's views
again, now over the drill's probe rows and polls. `collector-health` says what no stored poll
can: that the store refuses the collect process's writes now, or that its polls overrun their
interval (the Overview's notices, from the collect process's health file)."""


@dataclass(frozen=True)
class Inputs:
    """What `analyze` receives: each declared table over its last `history` snapshots (or
    `history_of[table]`, or for a `history_param` plugin the value of that Params field).

    Every table row carries `snapshot_id`, `collected_at` (UTC) and `cluster`. `snapshots` holds
    the store's index rows of the widest window, oldest first (`snapshot_id`, `collected_at`,
    `cluster`, `partial`, ...); its last row is the newest snapshot. `results` holds, by slug,
    the default-parameter result of each plugin named in `requires`, for the same newest
    snapshot.
    """

    tables: Mapping[str, pd.DataFrame]
    snapshots: pd.DataFrame
    results: Mapping[str, Result] = field(default_factory=dict)
    stepped: Mapping[str, pd.DataFrame] | None = None
    """Each of `step_outputs`, the frames of every poll's `step` over the window in poll order
    (`steps`); None before the runner has them."""
    step_tables: Mapping[str, pd.DataFrame] | None = None
    """The `step_inputs` over the whole window, when the steps are to be computed from them
    rather than read from a store (`runner.load_inputs`); dropped once they are."""
    # `latest` of each table, found once: `analyze` and `param_choices` each ask for the same
    # rows, a filter over the whole window every time (seconds at a million topics)
    _latest: dict[str, pd.DataFrame] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a plugin worker) without what `latest` and `derived` kept: both are
        found again from the tables."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_latest", "_derived")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _latest={}, _derived={})

    def derived(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()`, called once per `Inputs` and `key`: one run hands `analyze` and
        `param_choices` the same `Inputs`, so what both derive from it (a plugin's groups of
        subscriptions) is found once. Treat the value as read-only: both callers get it."""
        if key not in self._derived:
            self._derived[key] = compute()
        return cast(T, self._derived[key])

    def latest_snapshot_id(self) -> str | None:
        """The id of the newest snapshot, or None when there is none."""
        return _newest_id(self.snapshots)

    def history(self, name: str) -> pd.DataFrame:
        """All rows of table `name` (every snapshot in the window)."""
        return _declared(self.tables, name, "table", "inputs")

    def result(self, slug: str) -> Result:
        """The default-parameter result of plugin `slug`, one of those in `requires`."""
        return _declared(self.results, slug, "plugin", "requires")

    def steps(self, name: str) -> pd.DataFrame:
        """Frame `name` of every poll's `step` over the window, oldest poll first, one after
        the other (one of `step_outputs`)."""
        if self.stepped is None:
            raise KeyError(
                f"step frame {name!r}: these inputs hold no steps (the runner computes them; "
                "in a test, pulsar_lens.plugins.steps.with_steps or runner.run_on_inputs)"
            )
        return _declared(self.stepped, name, "step frame", "step_outputs")

    def latest(self, name: str) -> pd.DataFrame:
        """Rows of table `name` that belong to the newest snapshot only."""
        kept = self._latest.get(name)
        if kept is None:
            kept = self._latest[name] = _rows_of(self.history(name), self.latest_snapshot_id())
        return kept.copy(deep=False)  # its own frame: a change to it stays there (copy on write)


def _rows_of(frame: pd.DataFrame, snapshot_id: str | None) -> pd.DataFrame:
    """The rows of `frame` from snapshot `snapshot_id`, numbered from 0."""
    if snapshot_id is None or "snapshot_id" not in frame:
        return frame.iloc[0:0]
    mine = (frame["snapshot_id"] == snapshot_id).to_numpy(dtype=bool, na_value=False)
    if mine.all():  # a table read at the newest poll only (`history_of` 1): no copy
        return frame.reset_index(drop=True)
    return frame[mine].reset_index(drop=True)


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
    """A frame shown as a table. `links` names columns of URLs drawn as links: relative ones
    (`bundles?at=...`) open a page of this dashboard; a cell that is not a relative, http or
    https URL is shown empty."""

    frame: pd.DataFrame
    title: str = ""
    caption: str = ""
    links: tuple[str, ...] = ()


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

    def kept_rows(self, frame: pd.DataFrame) -> list[dict[str, Any]]:
        """The rows of `frame` (with `topic` and `subscription` columns) that `keeps`, as
        dicts, in the frame's order: only those rows are converted, not every subscription
        of a large cluster."""
        return kept_records(frame, self._kept)


def kept_records(frame: pd.DataFrame, kept: AbstractSet[tuple[str, str]]) -> list[dict[str, Any]]:
    """`MetricsContext.kept_rows` for the (topic, subscription) pairs `kept` (as text)."""
    if frame.empty or not kept:
        return []
    pairs = zip(frame["topic"], frame["subscription"], strict=True)
    picked = [i for i, (t, s) in enumerate(pairs) if (_text(t), _text(s)) in kept]
    rows: list[dict[str, Any]] = frame.iloc[picked].to_dict("records")
    return rows


def _text(value: object) -> str:
    """A name as `keeps` sees it in a row of `to_dict("records")`, which makes pd.NA None."""
    return str(None if value is pd.NA else value)


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
