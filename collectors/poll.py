"""poll(client) -> Snapshot of one cluster; diff(previous, current) -> events.

Cost: O(brokers + namespaces) requests, through bulk endpoints, plus one `.../stats` call
per topic that has a Key_Shared subscription with consumers or a Failover subscription with
two or more (the bulk answer lacks hash ranges, draining hashes and the active consumer).
All calls run on a bounded thread pool. An endpoint that fails is recorded in
`Snapshot.errors` and the rest of the poll goes on.

Bounds: the per-topic calls are at most `detail_budget` a poll, the topics detailed longest
ago first (a `DetailRotation` remembers across polls), so on a cluster of 10,000 Key_Shared
topics every topic is detailed in turn and no poll makes 10,000 calls. The whole poll has a
`deadline`: calls not started by then are skipped and recorded, and what was answered is
stored. Each answer is read within its own deadline and size cap (`AdminClient`).

Freshness: the per-broker bulk answer (`/admin/v2/broker-stats/topics`) is rebuilt by the
broker every `statsUpdateFrequencyInSecs` (60 s by default), so a consumer that joined since
may be missing; per-topic stats are live.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pyarrow as pa

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.assemble import PollAnswers, build_snapshot, namespace_listing
from pulsar_lens.collectors.brokers import (
    broker_web_url,
    collect_broker_ids,
    collect_clusters,
    collect_lb_metrics,
    collect_leader,
    collect_load_report,
    collect_owned_bundles,
    collect_version,
)
from pulsar_lens.collectors.bulkparts import (
    BrokerPart,
    IndexSink,
    PartBuilder,
    collect_broker_part,
    part_of_answer,
)
from pulsar_lens.collectors.detailchoice import (
    DetailRotation,
    candidates_of,
    most_backlogged,
    needing,
)
from pulsar_lens.collectors.events import EVENT_KINDS, carry_forward, diff
from pulsar_lens.collectors.namespaces import (
    collect_bundles,
    collect_namespaces,
    collect_partition_count,
    collect_partitioned_topics,
    collect_tenants,
    collect_topic_names,
    missing_partitioned,
)
from pulsar_lens.collectors.notes import noting
from pulsar_lens.collectors.recorder import Recorder
from pulsar_lens.collectors.topics import (
    collect_topic_stats,
)
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.names import (
    NameRefused,
    checked_broker_id,
    named_entity,
    namespace_path,
    shown_name,
)
from pulsar_lens.core.topicname import parse_topic_name
from pulsar_lens.core.values import DEFAULT_MAX_BROKERS

__all__ = ["EVENT_KINDS", "DetailRotation", "carry_forward", "diff", "poll"]

log = logging.getLogger(__name__)
DEFAULT_DEADLINE = 120.0
DEFAULT_DETAIL_BUDGET = 500
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def _gather(pool: ThreadPoolExecutor, jobs: Mapping[K, Callable[[], T]]) -> dict[K, T]:
    """Run leaf jobs on the pool and wait for all; only the polling thread ever waits."""
    futures: dict[K, Future[T]] = {key: pool.submit(job) for key, job in jobs.items()}
    return {key: future.result() for key, future in futures.items()}


Job = Callable[[], Any]


_NAME_CHECKS: Mapping[str, Callable[[str], object]] = {
    "clusters": lambda name: named_entity("cluster", name),
    "tenants": lambda name: named_entity("tenant", name),
    "namespaces": namespace_path,
    "brokers": checked_broker_id,
}


def _choose_cluster(clusters: Sequence[str], brokers: Mapping[str, Any], leader: str | None) -> str:
    """With several clusters (geo-replication), the local one is the leader's."""
    if len(clusters) == 1:
        return clusters[0]
    for name in clusters:
        if leader is not None and leader in (brokers.get(name) or ()):
            return name
    return clusters[0] if clusters else "unknown"


class _Poll:
    """One poll in rounds of independent calls: discovery and listings, then bulk, with
    the details round started inside it once every broker's part index is in."""

    def __init__(
        self,
        client: AdminClient,
        pool: ThreadPoolExecutor,
        answers: PollAnswers,
        timeout: float,
        rec: Recorder,
    ) -> None:
        self.client, self.pool, self.answers, self.t = client, pool, answers, timeout
        self.rec = rec
        self.lag_topics = 20
        self.detail_budget = DEFAULT_DETAIL_BUDGET
        self.max_brokers = DEFAULT_MAX_BROKERS
        self.rotation = DetailRotation()
        self.build: PartBuilder = part_of_answer
        self.last_cluster: str | None = None

    def call(self, family: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Job:
        return lambda: self.rec.call(family, fn, self.client, *args, timeout=self.t, **kw)

    def discover(self, cluster: str | None, namespaces: Sequence[str] | None) -> None:
        jobs: dict[str, Job] = {"leader": self.call("leader", collect_leader)}
        if cluster is None:
            jobs["clusters"] = self.call("clusters", collect_clusters)
        if namespaces is None:
            jobs["tenants"] = self.call("tenants", collect_tenants)
        first = _gather(self.pool, jobs)
        clusters = [cluster] if cluster is not None else self.valid("clusters", first["clusters"])
        if cluster is None and first["clusters"] is None and self.last_cluster:
            # one failed call (a leader busy for longer than the timeout) would leave the poll
            # without brokers, so without any subscription or consumer: a cluster's name does
            # not change, and the last poll's is asked for its brokers instead
            clusters = self.valid("clusters", [self.last_cluster])
            if clusters:
                self.rec.note(
                    "clusters",
                    f"the cluster list failed; the brokers of {self.last_cluster!r}, the "
                    "cluster the last poll found, were listed instead",
                )
        tenants = self.valid("tenants", first.get("tenants"))
        second = _gather(
            self.pool,
            {
                **{("c", c): self.call("brokers", collect_broker_ids, c) for c in clusters},
                **{("t", x): self.call("namespaces", collect_namespaces, x) for x in tenants},
            },
        )
        brokers = {k[1]: v for k, v in second.items() if k[0] == "c"}
        per_tenant = [v for k, v in second.items() if k[0] == "t"]
        a = self.answers
        a.leader = first["leader"]
        a.cluster = _choose_cluster(clusters, brokers, a.leader)
        a.broker_ids = self.contacted(self.valid("brokers", brokers.get(a.cluster)))
        a.web_urls = {b: broker_web_url(b, self.client.base_url) for b in a.broker_ids}
        self.client.trust_brokers(a.web_urls.values())
        if namespaces is None:
            namespaces = [ns for found in per_tenant for ns in found or ()]
            a.namespaces_complete = first["tenants"] is not None and None not in per_tenant
        a.namespaces = tuple(self.valid("namespaces", sorted(set(namespaces))))

    def valid(self, family: str, names: Sequence[str] | None) -> list[str]:
        """The `names` (of clusters, tenants, namespaces or brokers) a request path can
        carry; each other one is refused, said in the errors, and never asked for."""
        check = _NAME_CHECKS[family]
        kept = []
        for name in dict.fromkeys(names or ()):
            try:
                check(name)
            except NameRefused as exc:
                self.rec.refuse(family, str(exc))
            else:
                kept.append(name)
        return kept

    def contacted(self, listed: Sequence[str]) -> tuple[str, ...]:
        """The brokers this poll makes its per-broker calls to: at most `max_brokers`, the
        leader and the admin URL's own broker first, then by id; the rest said once."""
        own = urlsplit(self.client.base_url).netloc
        first = [b for b in (self.answers.leader or "", own) if b in listed]
        ranked = list(dict.fromkeys([*first, *sorted(listed)]))
        kept = ranked[: max(0, self.max_brokers)]
        if len(kept) < len(ranked):
            self.rec.note(
                "brokers",
                f"{len(ranked) - len(kept)} of the {len(ranked)} brokers listed were not "
                f"contacted: at most {self.max_brokers} a poll (PULSAR_LENS_MAX_BROKERS); "
                "their load, bundle ownership and topic stats are missing from this snapshot",
            )
        return tuple(sorted(kept))

    def bulk(self) -> None:
        """The bulk round, with the details round inside it: the per-topic calls are chosen
        from every broker's part index and start as soon as the indexes are in, while the
        workers still build the parts' rows (at 100,000 topics on two cores the details
        round took 0.6 s after the last part before)."""
        a, jobs = self.answers, {}
        arrivals = _Arrivals(a.broker_ids)
        parts: dict[str, Future[BrokerPart | None]] = {}
        for b in a.broker_ids:
            url = a.web_urls[b]
            parts[b] = self.pool.submit(
                self.call(
                    "broker_topic_stats",
                    collect_broker_part,
                    url,
                    b,
                    a.polled,
                    build=self.build,
                    early=arrivals.sink(b),
                )
            )
            arrivals.watch(b, parts[b])
        for b in a.broker_ids:
            url = a.web_urls[b]
            jobs[("owned", b)] = self.call(
                "owned_namespaces", collect_owned_bundles, a.cluster, b, url
            )
            jobs[("report", b)] = self.call("load_report", collect_load_report, url)
            jobs[("lb", b)] = self.call("lb_metrics", collect_lb_metrics, url)
        for ns in a.namespaces:
            jobs[("bundles", ns)] = self.call("bundles", collect_bundles, ns)
            jobs[("topics", ns)] = self.call("topic_list", collect_topic_names, ns)
            jobs[("parted", ns)] = self.call("partitioned_topics", collect_partitioned_topics, ns)
        done = _gather(self.pool, jobs)
        with noting(a.notes):
            self._keep_bulk(done)
        arrivals.wait()
        self.details(arrivals.indexes(parts))
        for b in a.broker_ids:
            a.parts[b] = parts[b].result()

    def _keep_bulk(self, done: Mapping[tuple[str, str], Any]) -> None:
        a = self.answers
        for b in a.broker_ids:
            a.owned[b] = done[("owned", b)]
            a.load_reports[b] = done[("report", b)]
            a.lb_metrics[b] = done[("lb", b)]
        for ns in a.namespaces:
            a.listings[ns] = namespace_listing(
                ns, done[("bundles", ns)], done[("topics", ns)], done[("parted", ns)]
            )

    def details(self, indexes: Mapping[str, pa.Table | None]) -> None:
        """The per-topic calls (`indexes`: each broker's part index, None for a broker whose
        part failed) and the versions and partition counts the bulk answers left out."""
        a, jobs = self.answers, {}
        for b in a.broker_ids:
            if not a.load_reports.get(b):
                jobs[("version", b)] = self.call("version", collect_version, a.web_urls[b])
        candidates = candidates_of(indexes)  # the parts hold the polled namespaces only
        lagging = most_backlogged(candidates, self.lag_topics)
        needs = needing(candidates, sorted(lagging))
        del candidates
        chosen = self.rotation.pick(needs.topics, self.detail_budget, first=sorted(lagging))
        if len(chosen) < len(needs.topics):
            self.rec.note(
                "topic_stats",
                f"per-topic stats of {len(needs.topics) - len(chosen)} of {len(needs.topics)} "
                f"topic(s) deferred to the next polls (at most {self.detail_budget} a poll, "
                "PULSAR_LENS_DETAIL_BUDGET); their subscriptions come from the bulk answer",
            )
        asked = needs.broker_of(chosen)
        for e_topic in chosen:
            b = asked[e_topic]
            jobs[("stats", e_topic)] = self.call(
                "topic_stats",
                collect_topic_stats,
                e_topic,
                web_url=a.web_urls.get(b),
                earliest_in_backlog=e_topic in lagging,
            )
        for listing in a.listings.values():
            for parent in missing_partitioned(listing):
                try:
                    path = parse_topic_name(parent).admin_path
                except NameRefused as exc:
                    self.rec.refuse("partitions", f"topic {shown_name(parent)}: {exc}")
                    continue
                jobs[("partitions", parent)] = self.call(
                    "partitions", collect_partition_count, path
                )
        for (kind, key), value in _gather(self.pool, jobs).items():
            if kind == "version":
                a.versions[key] = value
            elif value is not None and kind == "stats":
                a.topic_stats[key] = value
            elif value is not None:
                a.partition_counts[key] = value


class _Arrivals:
    """Each broker's part index, as soon as it is made (`sink`), or the end of its call
    (`ended`); `wait` returns once every broker has one or the other."""

    def __init__(self, brokers: Sequence[str]) -> None:
        self._brokers = tuple(brokers)
        self._index: dict[str, pa.Table] = {}
        self._ended: set[str] = set()
        self._changed = threading.Condition()

    def sink(self, broker: str) -> IndexSink:
        def told(index: pa.Table) -> None:
            with self._changed:
                self._index.setdefault(broker, index)
                self._changed.notify_all()

        return told

    def watch(self, broker: str, part: Future[BrokerPart | None]) -> None:
        """`ended` once `part`, the broker's call, is done, however it ended."""
        part.add_done_callback(lambda _: self.ended(broker))

    def ended(self, broker: str) -> None:
        with self._changed:
            self._ended.add(broker)
            self._changed.notify_all()

    def wait(self) -> None:
        """Bounded by the calls': each ends by its own deadline, the poll's at the latest."""
        with self._changed:
            self._changed.wait_for(
                lambda: all(b in self._index or b in self._ended for b in self._brokers)
            )

    def indexes(self, parts: Mapping[str, Future[BrokerPart | None]]) -> dict[str, pa.Table | None]:
        """Each broker's index: sent ahead, else its part's (None: its call failed)."""
        found: dict[str, pa.Table | None] = {}
        for broker in self._brokers:
            index = self._index.get(broker)
            if index is None:
                part = parts[broker].result()  # ended: no wait
                index = part.index if part is not None else None
            found[broker] = index
        return found


def poll(
    client: AdminClient,
    *,
    namespaces: Sequence[str] | None = None,
    concurrency: int = 8,
    timeout: float = 10.0,
    cluster: str | None = None,
    lag_topics: int = 20,
    deadline: float = DEFAULT_DEADLINE,
    detail_budget: int = DEFAULT_DETAIL_BUDGET,
    rotation: DetailRotation | None = None,
    max_brokers: int = DEFAULT_MAX_BROKERS,
    build: PartBuilder = part_of_answer,
    last_cluster: str | None = None,
) -> Snapshot:
    """One Snapshot of the cluster behind `client`; never raises for an endpoint failure.

    `namespaces` ("tenant/ns") limits the poll (default: every namespace of every tenant);
    `concurrency` bounds the calls in flight; `timeout` (seconds) applies to each call;
    `cluster` skips cluster discovery (default: the only cluster, or the leader's);
    `lag_topics` topics with the largest backlogs get one `.../stats` call that asks for the
    earliest publish time in the backlog (time lag), so the extra cost is bounded.
    `deadline` (seconds) bounds the whole poll; `detail_budget` the per-topic calls, chosen
    by `rotation` (pass the same one to every poll of a loop); `max_brokers` the brokers
    that get per-broker calls. Names no request path can carry are refused, not asked for.
    `build` turns each broker's bulk answer into its part (`PartPool.build`: in worker
    processes; by default in this one). `last_cluster`, the cluster the loop's last poll
    found, is the one whose brokers are listed when the cluster list fails.
    `Snapshot.requests` counts the HTTP requests sent (retries included);
    `Snapshot.durations` sums the seconds of each endpoint family's calls (they overlap, so
    families can add up to more than `total`, the poll's wall time).
    """
    answers = PollAnswers(cluster=cluster or "", collected_at=dt.datetime.now(dt.UTC))
    before, started = client.requests_made, time.monotonic()
    client.deadline = started + deadline
    rec = Recorder(client.deadline)
    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="poll") as pool:
            run = _Poll(client, pool, answers, timeout, rec)
            run.lag_topics = max(0, lag_topics)
            run.detail_budget = detail_budget
            run.max_brokers = max_brokers
            run.build = build
            run.last_cluster = last_cluster
            run.rotation = rotation or DetailRotation()
            run.discover(cluster, namespaces)
            run.bulk()  # the details round within it
    finally:
        client.deadline = None
    rec.finish(deadline)
    answers.errors = rec.errors
    answers.durations = {**rec.durations, "total": time.monotonic() - started}
    answers.requests = client.requests_made - before
    return build_snapshot(answers)
