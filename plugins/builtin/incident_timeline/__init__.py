"""`incident-timeline`: every kind of event of a window of stored polls on one time axis.

What each row comes from, computed once in its own home and read here through `requires`:

* bundle moves, unloads, splits and who made them: `bundle-ownership`'s `events` (its `by`:
  the load manager, or not, or unknown; rows the collector stored are `collector`'s);
* probe outages: `unload-latency`'s `outages`, at the last good acknowledgement before each;
* draining-hash episodes per holder consumer: `stuck-hashes`' `history` (a start at the first
  poll with a hash draining for it, an end at the first poll with none; the newest poll says
  how many are stuck);

and what the collector stored: consumers joining and leaving, failover's active consumer
changing, Key_Shared hash ranges changing and the load managers' unload and split counters
(the `events` table); consumers reconnecting (listed in two consecutive polls with a newer
`connectedSince`: the `consumers` table); a subscription's backlog reaching
`backlog_threshold` messages and falling under it again (the `subscriptions` table); polls
stored partial, and polls missing (the store's index: stored polls much further apart than
usual).

Each row names the page that explains it (`page`, a URL path), the poll to see it at
(`snapshot_id`: the first stored poll at or after the event) and a `link` to that page as of
that poll, with its namespace, topic and subscription as query parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pulsar_lens.api import (
    STEPS_API_VERSION,
    AnalysisPlugin,
    BaseModel,
    Chart,
    Field,
    Inputs,
    Metric,
    Note,
    Page,
    Result,
    Table,
    View,
)
from pulsar_lens.plugins.builtin.incident_timeline import clients, frames, steps
from pulsar_lens.plugins.builtin.incident_timeline.links import Kept, kept_apart, with_links
from pulsar_lens.plugins.builtin.incident_timeline.views import chart_events
from pulsar_lens.plugins.builtin.shared.choices import is_system_topic, offered, without_system

WINDOW = 60
COLLECTED_KINDS = ("consumer_joined", "consumer_left", "active_consumer_changed")
CLIENT_KINDS = (*COLLECTED_KINDS, "hash_ranges_changed")
EVENT_COLUMNS = [
    *[c for c in frames.ROW_COLUMNS if c != "explained_by"],
    "page",
    "snapshot_id",
    "link",
]


class IncidentTimeline(AnalysisPlugin):
    name = "incident-timeline"
    title = "Incident timeline"
    description = (
        "Every event of recent polls on one time axis: bundle moves and who made them, probe "
        "outages, draining hashes, failover flaps, consumers joining and leaving, backlogs "
        "over a threshold, partial and missing polls; each links to the page that explains it."
    )
    api_version = STEPS_API_VERSION
    version = "1.3"
    engine = "light"
    inputs = ("subscriptions",)
    history_of = {"subscriptions": 1}  # the newest poll's: every poll's are read by the steps
    columns_of = {
        "consumers": clients.RECONNECT_COLUMNS,  # not the hash ranges: the costliest
        "subscriptions": ("topic", "subscription", "type", "msg_backlog"),  # 4 of 26
        "events": clients.EVENT_COLUMNS,
    }
    requires = ("bundle-ownership", "unload-latency", "stuck-hashes")
    history = WINDOW
    outputs = ("events",)
    step_inputs = ("subscriptions", "consumers", "events")
    step_outputs = (
        "reconnects",
        "backlog_changes",
        "backlog_left",
        "untyped",
        "retyped",
        "clients",
        "load_managers",
    )
    step_params = ("backlog_threshold",)
    page = Page(
        title="Incident timeline",
        icon=":material/timeline:",
        url_path="timeline",
        order=60,
        caption="What happened, in order, across the cluster: each event links to the page "
        "that explains it, as of the poll that saw it.",
        controls=("namespace", "topic", "subscription"),
        panels=("collector-health",),  # a store refusing writes now leaves no poll to show it
    )

    class Params(BaseModel):
        window: int = Field(
            WINDOW, ge=1, le=WINDOW, description="Newest polls to lay out (their events)"
        )
        namespace: str = Field("", description="Only this namespace (tenant/ns); empty for all")
        topic: str = Field("", description="Only this topic; empty for all")
        subscription: str = Field("", description="Only this subscription; empty for all")
        backlog_threshold: int = Field(
            10_000,
            ge=1,
            le=10**15,
            description="A subscription backlog reaching this many messages is an event",
        )
        include_system: bool = Field(
            False,
            description="Include the events of system topics (names starting with __); "
            "a system topic chosen as the topic is shown either way",
        )

    def step(self, data: Inputs, params: Params) -> Result:
        subs = data.history("subscriptions")
        group = steps.subscription_groups(subs)  # each row's subscription, found once
        changes, left = steps.backlog_changes(
            subs, data.snapshots, params.backlog_threshold, group=group
        )
        events = steps.events_of(data.history("events"), data.snapshots)
        kinds = events["kind"].astype(str)
        poll = steps.rows_of_poll(subs, data.snapshots)
        untyped, retyped = steps.type_changes(subs, data.snapshots, group=group)
        frames = {
            "reconnects": steps.reconnects(data.history("consumers"), data.snapshots),
            "backlog_changes": changes,
            "backlog_left": left,
            "untyped": untyped,
            "retyped": retyped,
            "clients": clients.client_frame(events[kinds.isin(CLIENT_KINDS)], poll, data.snapshots),
            "load_managers": events[kinds.str.startswith("load_manager_")],
        }
        return Result(frames=frames)

    def analyze(self, data: Inputs, params: Params) -> Result:
        polls = data.snapshots.tail(params.window).reset_index(drop=True)
        types = clients.NewestTypes(data.latest("subscriptions"), data.steps("untyped"))
        stuck = data.result("stuck-hashes").frames
        before = [
            *frames.poll_rows(data.snapshots),
            *frames.bundle_rows(data.result("bundle-ownership").frames["events"]),
            *frames.outage_rows(data.result("unload-latency").frames["outages"]),
            *frames.load_manager_rows(data.steps("load_managers")),
        ]
        after = [
            *clients.reconnect_rows(data.steps("reconnects"), types),
            *frames.draining_rows(stuck["history"], stuck["hashes"], data.snapshots),
            *clients.backlog_rows(
                data.steps("backlog_changes"), data.steps("backlog_left"), params.backlog_threshold
            ),
        ]
        changed = pd.concat([data.steps("untyped"), data.steps("retyped")])
        client = data.steps("clients")
        todo = clients.unlinked(client, changed)
        client, kept = kept_apart(clients.with_pages(client, types, todo), todo)
        found = frames.to_frame(before, client, after)
        return timeline_of(found, data.snapshots, polls, params, kept)

    def render(self, result: Result, params: Params | None = None) -> list[View]:
        events, summary = result.frames["events"], result.summary
        views: list[View] = [
            Metric("Events", summary["events"]),
            Metric("Kinds", len(summary["kinds"])),
            Metric("Polls", summary["polls"]),
        ]
        if events.empty:
            return [*views, Note("No event in these polls.")]
        views.append(
            Chart(
                chart_events(events),
                title="Events over time",
                caption="One row per kind, coloured by who made it; click an event to open "
                "the page that explains it, as of the poll that saw it.",
            )
        )
        newest_first = events.iloc[::-1].reset_index(drop=True)
        views.append(
            Table(
                newest_first,
                title="Events",
                caption="Newest first. `link` opens the page that explains the event as of "
                "`snapshot_id`, the first poll at or after it.",
                links=("link",),
            )
        )
        return views

    def param_choices(self, data: Inputs) -> Mapping[str, Sequence[str]]:
        names = offered(data.latest("subscriptions"))
        namespaces = sorted(frames.namespaces_in(names["topic"][1:]))
        return {"namespace": ["", *namespaces], **names}


def timeline_of(
    found: pd.DataFrame,
    snapshots: pd.DataFrame,
    polls: pd.DataFrame,
    params: IncidentTimeline.Params,
    kept: Kept | None = None,
) -> Result:
    """The result: the rows `found` (`frames.to_frame`) of the chosen `polls` (the newest of
    `snapshots`) and filters, with their pages and links (those the steps made: `kept`), and
    what the summary says."""
    found = _filtered(_in_window(found, snapshots, polls), params)
    table = with_links(found, snapshots, kept).reindex(columns=EVENT_COLUMNS)
    summary = {
        "events": len(table),
        "kinds": {k: int(v) for k, v in table["kind"].value_counts().sort_index().items()},
        "polls": len(polls),
        "since": None if polls.empty else str(polls["collected_at"].iloc[0]),
        "until": None if polls.empty else str(polls["collected_at"].iloc[-1]),
    }
    return Result(frames={"events": table}, summary=summary)


def _in_window(found: pd.DataFrame, snapshots: pd.DataFrame, polls: pd.DataFrame) -> pd.DataFrame:
    """The rows after the poll before the window's first one: those its polls saw."""
    if polls.empty:
        return found.iloc[0:0]
    earlier = len(snapshots) - len(polls) - 1
    if earlier < 0:
        return found
    after = pd.Timestamp(snapshots["collected_at"].iloc[earlier])
    return found[found["at"] > after].reset_index(drop=True)


def _filtered(found: pd.DataFrame, params: IncidentTimeline.Params) -> pd.DataFrame:
    """Rows of the chosen namespace, topic and subscription. A row without one of these
    (a poll, a load manager's counter; a bundle has no topic) is kept; a topic also keeps
    its namespace's rows that name no topic (its bundle's moves). System topics' rows (the
    broker's own readers of `__change_events` joining and leaving) only when asked for."""
    if not (params.include_system or is_system_topic(params.topic)):
        found = without_system(found)
    namespace = params.namespace or (frames.namespace_of(params.topic) if params.topic else "")
    keep = pd.Series(True, index=found.index)
    for column, wanted in (
        ("namespace", namespace),
        ("topic", params.topic),
        ("subscription", params.subscription),
    ):
        if wanted:
            keep &= found[column].isna() | (found[column] == wanted)
    return found[keep].reset_index(drop=True)
