"""`failover-history` (Spark): every Failover subscription over the whole stored history.

A *group* is (parent partitioned topic or the topic itself, subscription), labelled
`sub @ parent` as `failover-assignment` labels it. Over every stored poll, per group:

- `timeline`: the partitions each consumer is active on, poll by poll (the worst `top`
  groups, newest `timeline_polls` polls);
- `imbalance`: busiest minus idlest consumer (`spread`) and busiest over the fair share
  (`ratio`), poll by poll (same groups and polls); `groups` sums it up for every group:
  worst spread and ratio, polls imbalanced (spread over 1), share of polls balanced;
- `partitions`: how often each partition's active consumer changed between polls, and how
  many of those changes came while its connected consumers stayed the same (suspicious),
  the most changes first; `groups` adds them up;
- `what_if`: at the newest poll, what one consumer leaving or joining would move and how
  balanced the group would be, under modulo and under PIP-392 consistent hashing, by the
  broker's own picker (`whatif`).

`reference` states the rule on pandas and the tests prove that both engines give the same
frames. The counting runs in Spark (`plan`); the what-if runs per group through
`applyInPandas`.
"""

from __future__ import annotations

from typing import Any

from pulsar_lens.api import (
    HISTORY_ALL,
    AnalysisPlugin,
    BaseModel,
    Field,
    JvmCharset,
    Page,
    Result,
    SparkInputs,
    View,
    jvm_charset,
)
from pulsar_lens.plugins.builtin.failover_history.frames import OUTPUTS
from pulsar_lens.plugins.builtin.failover_history.plan import spark_result


class FailoverHistory(AnalysisPlugin):
    name = "failover-history"
    title = "Failover history"
    description = (
        "Every Failover subscription over the whole stored history: partitions per active "
        "consumer over time, imbalance, flapping (and the flaps no consumer change explains), "
        "and what one consumer leaving or joining would move under modulo and PIP-392."
    )
    version = "0.1"
    engine = "spark"
    inputs = ("subscriptions", "consumers", "topics")
    history = HISTORY_ALL
    outputs = OUTPUTS
    page = Page(
        title="Failover history",
        icon=":material/history:",
        caption="Active consumers, imbalance and flapping of every Failover group over the "
        "stored history, and the PIP-392 what-if, from a Spark job.",
        url_path="failover-history",
        order=35,
    )

    class Params(BaseModel):
        top: int = Field(
            10, ge=1, le=100, description="Groups whose timelines are kept, the worst first"
        )
        timeline_polls: int = Field(
            500, ge=1, le=100_000, description="Newest polls kept in those timelines"
        )
        jvm_charset: JvmCharset = Field(
            "",
            validate_default=True,
            description="How the broker's JVM encodes consumer names (UTF-8 or US-ASCII); "
            "empty: PULSAR_LENS_JVM_CHARSET, else UTF-8",
        )

    def analyze(self, data: Any, params: Any) -> Result:
        assert isinstance(data, SparkInputs)
        return spark_result(
            data,
            top=params.top,
            timeline_polls=params.timeline_polls,
            charset=jvm_charset(params.jvm_charset),
        )

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        from pulsar_lens.plugins.builtin.failover_history.views import (
            render_views,  # altair: on use
        )

        return render_views(result)
