"""A dump of admin answers (`pulsar-admin` output or admin REST JSON, saved as files) read
into the `PollAnswers` a poll would have kept, and assembled by `build_snapshot` exactly as a
poll's are: `pulsar-lens import` stores the snapshot as the collector stores its own.

One capture is one folder (docs/import.md draws it): its time (folder name or `captured_at`),
`brokers-list`, and per broker, namespace and topic the files of the commands that describe
them. `brokers-list` and each listed broker's `broker-stats-topics` are required; every other
file is optional, and one that is missing makes the snapshot partial as a failed call makes a
poll's, its error naming the REST call the file stands for (so the event diff and the analyses
treat what it would have told as unknown). A file that is there but cannot be read refuses
the whole capture (`DumpRefused`): nothing of it is stored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pulsar_lens.collectors.assemble import (
    PollAnswers,
    build_snapshot,
    bulk_by_topic,
    namespace_listing,
)
from pulsar_lens.collectors.brokers import GLOBAL_CLUSTER, parse_leader
from pulsar_lens.collectors.dumpfiles import (
    capture_time,
    find,
    read_bytes,
    read_json,
    read_metrics,
    read_names,
    read_object,
    read_owned,
    read_scalar,
    refused,
    shown_path,
)
from pulsar_lens.collectors.namespaces import parse_boundaries
from pulsar_lens.collectors.notes import noting
from pulsar_lens.collectors.recorder import Recorder
from pulsar_lens.collectors.topics import (
    parse_broker_topic_stats,
    topic_refusal,
)
from pulsar_lens.collectors.typedrecords import needs_details
from pulsar_lens.core.errors import DumpRefused
from pulsar_lens.core.limits import MAX_PARTITIONS
from pulsar_lens.core.model import EndpointError, Snapshot
from pulsar_lens.core.names import NameRefused, checked_broker_id, named_entity, namespace_path
from pulsar_lens.core.topicname import parse_topic_name

CLUSTERS = "clusters-list"
BROKERS = "brokers-list"
LEADER = "brokers-leader-broker"
BULK = "broker-stats-topics"
OWNED = "brokers-namespaces"
LOAD_REPORT = "broker-stats-load-report"
METRICS = "broker-stats-monitoring-metrics"
VERSION = "brokers-version"
BUNDLES = "namespaces-bundles"
TOPICS = "topics-list"
PARTITIONED = "topics-list-partitioned-topics"
STATS = "topics-stats"
PARTITIONED_STATS = "topics-partitioned-stats"
METADATA = "topics-get-partitioned-topic-metadata"
DOMAINS = ("persistent", "non-persistent")
MAX_ENTRIES = 200_000
"""Folders one capture may hold (brokers, namespaces, topics), and captures a dump."""
MISSING = "not in the dump"


def capture_folders(root: Path) -> list[Path]:
    """The captures of a dump: `root` itself when it is one (it holds brokers-list), else
    each folder in it. DumpRefused when there is none."""
    if not root.is_dir():
        raise refused(root, "is not a folder")
    if find(root, BROKERS) is not None:
        return [root]
    found = sorted(_subfolders(root, [0]))
    if not found:
        raise refused(
            root,
            f"holds no capture: a capture is a folder with a {BROKERS} file (docs/import.md)",
        )
    return found


def _subfolders(folder: Path, seen: list[int]) -> Iterator[Path]:
    """The folders in `folder` (no links), at most MAX_ENTRIES across one reading."""
    try:
        entries = os.scandir(folder)
    except OSError as exc:
        raise refused(folder, f"cannot be listed: {exc.strerror}") from None
    with entries:
        for entry in entries:
            seen[0] += 1
            if seen[0] > MAX_ENTRIES:
                raise refused(folder, f"holds over {MAX_ENTRIES:,} entries")
            if entry.is_dir(follow_symlinks=False):
                yield Path(entry.path)


def read_capture(folder: Path, *, cluster: str | None, cap: int) -> Snapshot:
    """The snapshot one capture folder describes; DumpRefused when a file it holds cannot be
    read, a required one is missing, or it says no capture time or cluster. `cap` bounds
    each file (PULSAR_LENS_MAX_RESPONSE, as an answer's body)."""
    answers = PollAnswers(cluster=cluster or "", collected_at=capture_time(folder, cap))
    _Capture(folder, cap, answers).read(cluster)
    return build_snapshot(answers)


class _Capture:
    """Reads one capture folder into `answers`, in the poll's order."""

    def __init__(self, folder: Path, cap: int, answers: PollAnswers) -> None:
        self.folder, self.cap, self.a = folder, cap, answers
        self.rec = Recorder()
        self.missing: list[EndpointError] = []
        self.seen = [0]

    def read(self, cluster: str | None) -> None:
        a = self.a
        a.cluster = cluster or self._cluster()
        a.broker_ids = self._brokers()
        a.web_urls = {b: f"http://{b}" for b in a.broker_ids}
        a.leader = self._leader()
        with noting(a.notes):
            for broker in a.broker_ids:
                self._broker(broker)
            self._namespaces()
            self._topics()
        self._lacking_details()
        self.rec.finish(0.0)
        a.errors = [*self.rec.errors, *self.missing]

    def required(self, folder: Path, name: str, what: str) -> Path:
        path = find(folder, name)
        if path is None:
            raise refused(folder / name, f"is missing: a capture needs {what}")
        return path

    def optional(self, folder: Path, name: str, endpoint: str) -> Path | None:
        """The file, or None after saying, as the call it stands for, that it is missing."""
        path = find(folder, name)
        if path is None:
            where = shown_path((folder / name).relative_to(self.folder))
            self.missing.append(EndpointError(endpoint, None, f"{MISSING} (no {where} file)"))
        return path

    def _cluster(self) -> str:
        path = find(self.folder, CLUSTERS)
        if path is None:
            raise refused(self.folder, f"names no cluster: pass --cluster NAME or add {CLUSTERS}")
        names = [n for n in read_names(path, self.cap, "clusters") if n != GLOBAL_CLUSTER]
        if len(names) != 1 or not isinstance(names[0], str):
            listed = ", ".join(repr(n)[:80] for n in names[:5]) or "none"
            raise refused(path, f"lists {listed}, not one cluster: pass --cluster NAME")
        try:
            return named_entity("cluster", names[0])
        except NameRefused as exc:
            raise refused(path, str(exc)) from None

    def _brokers(self) -> tuple[str, ...]:
        path = self.required(self.folder, BROKERS, "the brokers of the cluster")
        kept: list[str] = []
        for name in read_names(path, self.cap, "brokers"):
            if not isinstance(name, str):
                self.rec.refuse("brokers", f"{shown_path(path)}: an item that is no name")
                continue
            try:
                kept.append(checked_broker_id(name))
            except NameRefused as exc:
                self.rec.refuse("brokers", str(exc))
        if not kept:
            raise refused(path, "lists no broker (host:port of its web service)")
        return tuple(sorted(set(kept)))

    def _leader(self) -> str | None:
        path = self.optional(self.folder, LEADER, "GET /admin/v2/brokers/leaderBroker")
        if path is None:
            return None
        leader = parse_leader(read_json(path, self.cap))
        if leader is None:
            raise refused(path, "names no leader (an object with brokerId or serviceUrl)")
        return leader

    def _broker_folder(self, broker: str) -> Path:
        """brokers/<host:port>/; the capture folder itself serves a cluster of one broker."""
        own = self.folder / "brokers" / broker
        alone = len(self.a.broker_ids) == 1 and find(self.folder, BULK) is not None
        if alone and own.is_dir():
            raise refused(own, "and the capture folder both hold the broker's files; keep one")
        return self.folder if alone else own

    def _broker(self, broker: str) -> None:
        a, cap = self.a, self.cap
        folder = self._broker_folder(broker)
        url = a.web_urls[broker]
        bulk = read_object(self.required(folder, BULK, "each broker's topic stats"), cap, BULK)
        a.bulk[broker] = parse_broker_topic_stats(bulk, broker)
        path = self.optional(
            folder, OWNED, f"GET {url}/admin/v2/brokers/{a.cluster}/{broker}/ownedNamespaces"
        )
        a.owned[broker] = read_owned(path, cap) if path else None
        path = self.optional(folder, LOAD_REPORT, f"GET {url}/admin/v2/broker-stats/load-report")
        a.load_reports[broker] = self._load_report(path) if path else None
        path = self.optional(folder, METRICS, f"GET {url}/admin/v2/broker-stats/metrics")
        a.lb_metrics[broker] = read_metrics(path, cap) if path else None
        path = find(folder, VERSION)
        if path is not None:
            a.versions[broker] = read_scalar(path, cap)
        elif not a.load_reports[broker]:  # a load report says the version too
            self.optional(folder, VERSION, f"GET {url}/admin/v2/brokers/version")

    def _load_report(self, path: Path) -> Any:
        """A load report, or None: what NoopLoadManager's broker answers (204; pulsar-admin
        prints null)."""
        if not read_bytes(path, self.cap).strip():
            return None
        report = read_json(path, self.cap)
        if report is not None and not isinstance(report, dict):
            raise refused(path, "holds no load report (a JSON object, or null)")
        return report

    def _namespaces(self) -> None:
        a = self.a
        root = self.folder / "namespaces"
        names = []
        for tenant in _subfolders(root, self.seen) if root.is_dir() else ():
            for folder in _subfolders(tenant, self.seen):
                name = f"{tenant.name}/{folder.name}"
                try:
                    namespace_path(name)
                except NameRefused as exc:
                    self.rec.refuse("namespaces", str(exc))
                    continue
                names.append(name)
                self._namespace(name, folder)
        if names:
            a.namespaces = tuple(sorted(names))
            return
        # no namespace listed: those the brokers' topic stats name, as a failed tenant listing
        a.namespaces_complete = False
        self.missing.append(
            EndpointError(
                "GET /admin/v2/tenants",
                None,
                f"{MISSING} (no namespaces/ folder): the namespaces are those the brokers' "
                "topic stats name, their bundles those the brokers own",
            )
        )

    def _namespace(self, ns: str, folder: Path) -> None:
        cap = self.cap
        path = self.optional(folder, BUNDLES, f"GET /admin/v2/namespaces/{ns}/bundles")
        bundles = read_object(path, cap, "a namespace's bundles") if path else None
        if path is not None:
            try:
                parse_boundaries(bundles)
            except ValueError as exc:
                raise refused(path, f"holds no bundle boundaries: {exc}") from None
        path = self.optional(folder, TOPICS, f"GET /admin/v2/persistent/{ns}")
        topics = read_names(path, cap, "topics") if path else None
        path = self.optional(folder, PARTITIONED, f"GET /admin/v2/persistent/{ns}/partitioned")
        parted = read_names(path, cap, "partitioned topics") if path else None
        self.a.listings[ns] = namespace_listing(ns, bundles, topics, parted)

    def _topics(self) -> None:
        root = self.folder / "topics"
        for domain in _subfolders(root, self.seen) if root.is_dir() else ():
            if domain.name not in DOMAINS:
                raise refused(domain, "is no topic domain (persistent, non-persistent)")
            for tenant in _subfolders(domain, self.seen):
                for ns in _subfolders(tenant, self.seen):
                    for local in _subfolders(ns, self.seen):
                        name = f"{domain.name}://{tenant.name}/{ns.name}/{local.name}"
                        why = topic_refusal(name)
                        if why is not None:
                            self.rec.refuse("topic_stats", f"topic {shown_path(name)} {why}")
                            continue
                        self._topic(name, local)

    def _topic(self, topic: str, folder: Path) -> None:
        a, cap = self.a, self.cap
        path = find(folder, STATS)
        if path is not None:
            a.topic_stats[topic] = read_object(path, cap, "a topic's stats")
        path = find(folder, PARTITIONED_STATS)
        if path is not None:
            for partition, stats in self._partitions(path, topic):
                a.topic_stats.setdefault(partition, stats)  # a partition's own file wins
        path = find(folder, METADATA)
        if path is not None:
            count = read_object(path, cap, "a partitioned topic's metadata").get("partitions")
            if not isinstance(count, int) or isinstance(count, bool):
                raise refused(path, "holds no partitions: N")
            if not 0 <= count <= MAX_PARTITIONS:
                raise refused(path, f"says {count:,} partitions, not 0 to {MAX_PARTITIONS:,}")
            a.partition_counts[topic] = count

    def _partitions(self, path: Path, topic: str) -> Iterator[tuple[str, Any]]:
        stats = read_object(path, self.cap, "a partitioned topic's stats")
        partitions = stats.get("partitions")
        if not isinstance(partitions, dict):
            raise refused(path, "holds no stats per partition: capture it with --per-partition")
        for name, entry in partitions.items():
            if not isinstance(entry, dict) or not name.startswith(f"{topic}-partition-"):
                self.rec.refuse("topic_stats", f"{shown_path(path)}: partition {name!r:.80}")
                continue
            if topic_refusal(name) is None and parse_topic_name(name).partition_index is not None:
                yield name, entry

    def _lacking_details(self) -> None:
        """Say which topics lack the per-topic stats that only they give (as the poll says
        which it deferred)."""
        a = self.a
        wanted = set(a.namespaces)
        lacking = sorted(
            topic
            for topic, entry in bulk_by_topic(a).items()
            if needs_details(entry.stats)
            and topic not in a.topic_stats
            and (not a.namespaces_complete or parse_topic_name(topic).namespace in wanted)
        )
        if lacking:
            shown = ", ".join(shown_path(t) for t in lacking[:3])
            self.rec.note(
                "topic_stats",
                f"per-topic stats of {len(lacking)} topic(s) that need them are {MISSING} "
                f"(e.g. {shown}): their subscriptions come from the broker's bulk answer, "
                "without hash ranges, draining hashes or the active consumer",
            )


__all__ = ["DumpRefused", "capture_folders", "read_capture"]
