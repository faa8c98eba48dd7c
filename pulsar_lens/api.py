"""The plugin contract: the only module a plugin author imports.

A plugin is an `AnalysisPlugin` subclass declaring its metadata as class attributes, a
pydantic `Params` model, and two methods: `analyze(inputs, params) -> Result` (pure, frames in,
frames out) and `render(result) -> list[View]` (Altair charts, tables, metrics, notes, laid out
with sections, columns and tabs; never Streamlit). Optional: `metrics(result, context)` for
/metrics, and `page` for a page of its own in the dashboard. See docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.core import Metric as MetricFamily
from pydantic import BaseModel, Field

# The values that cross the contract live in api_types; authors import them from here.
from pulsar_lens.api_types import (
    PANELS,
    Chart,
    Columns,
    Inputs,
    Metric,
    MetricsContext,
    Note,
    NoteLevel,
    Page,
    Result,
    Section,
    SparkInputs,
    Table,
    Tabs,
    View,
    empty_frame,
    finite,
    frame_of,
)

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
from pulsar_lens.core.failover_sets import (
    ConsumerSets,
    active_positions,
    consumer_sets,
    rule_positions,
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

__all__ = [
    "API_VERSION",
    "ENGINES",
    "HISTORY_ALL",
    "OLDEST_API_VERSION",
    "OTHER_CHARSET",
    "PANELS",
    "STEPS_API_VERSION",
    "AnalysisPlugin",
    "Assignments",
    "BaseModel",
    "BundleRange",
    "Chart",
    "Columns",
    "ConsistentHashingSelector",
    "Consumer",
    "ConsumerSets",
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
    "active_positions",
    "compare_modes",
    "compute_key_load",
    "consumer_sets",
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
    "rule_positions",
    "select_active_consumer",
    "sticky_key_hash",
    "sticky_key_hash_array",
    "topic_bundle",
    "topic_bundle_hash",
    "topic_bundles",
]

API_VERSION = 2
"""The plugin API this version of Pulsar Lens offers. It goes up when the contract changes in a
way an older plugin cannot follow; a plugin declares the one it was written for in
`AnalysisPlugin.api_version`, and one written for a newer API is refused at load time."""

OLDEST_API_VERSION = 1
"""The oldest plugin API this version still runs; a plugin declaring an older one is refused."""

STEPS_API_VERSION = 2
"""The plugin API that brought steps (`AnalysisPlugin.step`): a plugin that declares
`step_inputs` declares this API or a newer one, so an older Pulsar Lens refuses it rather than
running its `analyze` without the steps."""

Engine = Literal["light", "spark"]
"""`light` runs `analyze` on pandas frames (`Inputs`); `spark` on Spark DataFrames
(`SparkInputs`), for analyses that read long history or many keys (docs/spark.md)."""


HISTORY_ALL = 1_000_000
"""A `history` that means every stored poll (retention bounds it): for Spark analyses of the
whole stored history."""


class AnalysisPlugin:
    """Base class of every analysis; subclass it and declare the class attributes.

    `name` is a stable kebab-case slug (it appears in URLs, cache keys and stored results);
    `inputs` are table names from `core.model.TABLES`; `history` is how many recent snapshots
    the runner loads of each of them, and `history_of` sets another count for some tables
    (e.g. `{"key_samples": 12}` beside `history = 1`); `history_param` names an integer
    `Params` field when `analyze` reads only that many of the newest polls of the tables
    `history_of` does not name (a trend over a `window` the page chooses), so that the runner
    reads only those of them (`history` is then their upper bound and still keys the
    window's results); `columns_of` names the only columns
    `analyze` reads of some tables (`snapshot_id` and `collected_at` always come), so a light
    plugin is not handed the others; `outputs` are the frame names `analyze`
    must return; `page` asks for a dashboard page of the plugin's own; `requires` are the
    slugs of plugins whose default-parameter result `analyze` reads (`Inputs.result`);
    `api_version` is the plugin API (`API_VERSION`) the plugin was written for.

    A light plugin whose analysis compares each poll with the one before it over a long
    window may declare `step_inputs` (snapshot tables, `columns_of` applies) and
    `step_outputs`, and define `step`: what one poll says against the poll before it. Each
    poll's step is computed once and kept beside the stored results, so a pass reads two polls
    of those tables, not `history` of them; `analyze` reads every poll's step frames through
    `Inputs.steps` (docs/plugins.md, "Steps"). `step_params` names the `Params` fields a step
    depends on: steps are kept per their values only, so other params (a page's filters) read
    the same steps.
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
    history_param: ClassVar[str | None] = None
    columns_of: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    outputs: ClassVar[tuple[str, ...]]
    page: ClassVar[Page | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    step_inputs: ClassVar[tuple[str, ...]] = ()
    step_outputs: ClassVar[tuple[str, ...]] = ()
    step_params: ClassVar[tuple[str, ...]] = ()

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

    def step(self, data: Inputs, params: Any) -> Result:
        """What one poll says against the poll before it, as the `step_outputs` frames; pure,
        no I/O. `data.snapshots` holds the poll before (when the window has one) and the poll,
        oldest first; `data.history(t)` their rows of each of `step_inputs`. The window's first
        poll comes alone. The frames must follow from these two polls and `params` only: a
        step is computed once and read back by every later pass whose window holds the poll,
        with any params whose `step_params` fields are the same.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def render(self, result: Result, params: Any = None) -> list[View]:
        """Turn a result into views; no Streamlit calls. `params` are the validated `Params`
        the result was computed with (the defaults for a stored one). A render written
        with one argument, `render(self, result)`, is still called that way."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        """Allowed values of str params, taken from the data; the dashboard shows a selectbox."""
        return {}
