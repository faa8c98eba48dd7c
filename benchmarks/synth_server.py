"""A synthetic Pulsar 4.0 cluster served over HTTP on loopback, as its brokers answer a poll.

    .venv/bin/python -m benchmarks.synth_server --topics 100000 [--brokers N] [--change 0.1]

Each of N brokers listens on its own 127.0.0.1 port and lists itself as `127.0.0.1:<port>`,
so the collector's per-broker calls (`broker-stats/topics`, `ownedNamespaces`, `load-report`,
`metrics`, `version`) reach that broker's own server; the cluster-wide calls are answered by
any of them. The cluster is `benchmarks.synth_cluster`'s shape (20 namespaces of 16 bundles,
10% partitions of 10-partition topics, one subscription per topic: Exclusive, Shared,
Failover or Key_Shared, every partition Failover), its bundles spread over the brokers.

Generations: the answers of one poll are rendered once, as bytes, and served from them. The
first GET /admin/v2/clusters after a generation's bulk answers were read starts the next
one (a poll asks for the clusters once, first), which a background thread rendered while the
previous poll ran. With `--render-on-request` that thread starts only on
`GET /__synth/render` (the scale harness asks once a poll's analyses are stored, so the
render competes with no poll for the two cores) or, when nobody asked in time, at the start
of the poll that needs it, which then waits for it (`waited` in the stats).

Between two generations `--change` of the topics change: rates and backlog, and a fifth
of their consumers leave or come back (a Failover group whose active consumer left gets
another); one bundle moves to another broker. Only the changed topics
are rendered again; a broker's body is the join of its bundles' topic fragments.

Memory: the fragments of every topic (one bytes object each, ~1.7 kB) plus two generations
of broker bodies (the one served, the next): about three times the JSON of one poll, plus
the shape's arrays and names.

On start it prints one JSON line (the admin URL, the brokers, the generation's size and the
time it took) and serves until stdin closes or SIGTERM. `GET /__synth/stats` says what was
served, 404s included; `GET /__synth/manifest?generation=K` lists the topics, subscriptions
and consumers generation K served (with `--manifests`: correctness checks at small sizes).
Anything else Pulsar would not answer gets its 404: `{"reason": "..."}`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import re
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from benchmarks.synth_cluster import Shape, initial_state, make_shape

CLUSTER = "synthetic"
VERSION = "4.0.7"
START = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
LEAVE_SHARE = 0.2  # of the consumers of a changed topic, those that leave or come back
TOPICS_PER_BROKER = 50_000  # the default broker count: one per this many topics, at least 3


def default_brokers(topics: int) -> int:
    return max(3, math.ceil(topics / TOPICS_PER_BROKER))


def _since(generation: int) -> str:
    return (START + dt.timedelta(seconds=30 * generation)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Generation:
    """The answers of one poll, as bytes, and what they hold."""

    number: int
    bulk: dict[str, bytes]  # broker id -> broker-stats/topics
    owned: dict[str, bytes]  # broker id -> ownedNamespaces
    owner: np.ndarray  # broker index per bundle
    present: np.ndarray  # per consumer
    active: np.ndarray  # consumer slot per subscription, -1 when none
    rate: np.ndarray
    backlog: np.ndarray
    since: np.ndarray  # generation each consumer connected in
    render_cpu: float = 0.0  # thread CPU seconds it took to render
    render_wall: float = 0.0


@dataclass
class Served:
    """What the server answered, for /__synth/stats."""

    requests: dict[str, int] = field(default_factory=dict)
    not_found: dict[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    waited: float = 0.0  # seconds a poll waited for its generation to be rendered


class SynthCluster:
    """The cluster's fixed shape, its changing state, and each generation's answers."""

    def __init__(
        self,
        topics: int,
        brokers: list[str],
        *,
        change: float,
        seed: int = 7,
        manifests: bool = False,
        render_on_request: bool = False,
    ) -> None:
        self.keep_manifests = manifests
        self.render_on_request = render_on_request
        self.rendering = False  # a render thread is under way
        self.rng = np.random.default_rng(seed)
        self.shape: Shape = make_shape(topics, brokers=len(brokers), rng=self.rng)
        self.brokers = brokers
        self.change = change
        s = self.shape
        self.names: list[str] = s.topic.to_pylist()
        self.namespaces = sorted(set(s.bundle_ns.to_pylist()))
        self.bundle_ns: list[str] = s.bundle_ns.to_pylist()
        self.bundle_name: list[str] = s.bundle_name.to_pylist()
        self.sub_name: list[str] = s.sub_name.to_pylist()
        self.sub_type: list[str] = s.sub_type.to_pylist()
        self.sub_mode: list[str | None] = s.sub_mode.to_pylist()
        self.consumer: list[str] = s.consumer_name.to_pylist()
        flat = s.hash_ranges.flatten()  # per consumer, as offsets into two int arrays
        self.range_at = s.hash_ranges.offsets.to_numpy()
        self.range_start = flat.field("start").to_numpy()
        self.range_end = flat.field("end").to_numpy()
        self.first = s.first
        order = np.argsort(s.bundle_of, kind="stable")
        cuts = np.searchsorted(s.bundle_of[order], np.arange(len(s.lower) + 1))
        self.of_bundle = [order[cuts[b] : cuts[b + 1]] for b in range(len(s.lower))]
        state = initial_state(s, self.rng)
        self._static = self._static_answers()
        self.fragments: list[bytes] = []
        self.current = self._render(
            0,
            owner=state.owner.copy(),
            present=np.ones(int(s.first[-1]), dtype=bool),
            active=state.active.copy(),
            rate=s.base_rate.copy(),
            backlog=(s.base_rate * 3).astype(np.int64),
            since=np.zeros(int(s.first[-1]), dtype=np.int64),
            changed=None,
        )
        self.next: Generation | None = None
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.bulk_read = False
        self.served = Served()
        self.manifests: dict[int, dict[str, list[Any]]] = {}
        self.history: list[dict[str, Any]] = [self._summary(self.current)]

    # --- what stays the same -------------------------------------------------------------

    def _static_answers(self) -> dict[str, bytes]:
        s, answers = self.shape, {}
        tenants = sorted({ns.split("/")[0] for ns in self.namespaces})
        answers["/admin/v2/clusters"] = json.dumps([CLUSTER]).encode()
        answers["/admin/v2/tenants"] = json.dumps(tenants).encode()
        answers[f"/admin/v2/brokers/{CLUSTER}"] = json.dumps(self.brokers).encode()
        leader = {"serviceUrl": f"http://{self.brokers[0]}", "brokerId": self.brokers[0]}
        answers["/admin/v2/brokers/leaderBroker"] = json.dumps(leader).encode()
        for tenant in tenants:
            mine = [ns for ns in self.namespaces if ns.split("/")[0] == tenant]
            answers[f"/admin/v2/namespaces/{tenant}"] = json.dumps(mine).encode()
        listed: dict[str, list[str]] = {ns: [] for ns in self.namespaces}
        parted: dict[str, set[str]] = {ns: set() for ns in self.namespaces}
        for t, parent in enumerate(s.parent.to_pylist()):
            ns = self.bundle_ns[int(s.bundle_of[t])]
            listed[ns].append(self.names[t])
            if parent is not None:
                parted[ns].add(parent)
        for ns in self.namespaces:
            idx = [i for i, n in enumerate(self.bundle_ns) if n == ns]
            bounds = [f"0x{int(s.lower[i]):08x}" for i in idx] + [f"0x{int(s.upper[idx[-1]]):08x}"]
            bundles = {"boundaries": bounds, "numBundles": len(idx)}
            answers[f"/admin/v2/namespaces/{ns}/bundles"] = json.dumps(bundles).encode()
            answers[f"/admin/v2/persistent/{ns}"] = json.dumps(listed[ns]).encode()
            parents = json.dumps(sorted(parted[ns])).encode()
            answers[f"/admin/v2/persistent/{ns}/partitioned"] = parents
        return answers

    # --- rendering -----------------------------------------------------------------------

    def _consumer_json(self, c: int, gen_since: int, rate: float, size: float) -> str:
        return (
            f'{{"address":"/10.0.{c % 250}.{c % 200}:{40000 + c % 20000}",'
            f'"consumerName":"{self.consumer[c]}","availablePermits":1000,'
            f'"connectedSince":"{_since(gen_since)}","msgRateOut":{rate:.3f},'
            f'"msgThroughputOut":{rate * size:.3f},"msgRateRedeliver":0.0,'
            f'"avgMessagesPerEntry":1,"messageAckRate":{rate:.3f},"unackedMessages":0,'
            '"blockedConsumerOnUnackedMsgs":false,"clientVersion":"Pulsar-Java-v4.0.7",'
            '"metadata":{}}'
        )

    def _stats_json(self, t: int, g: Generation, consumers: list[str], extra: str = "") -> str:
        """A topic's stats object; `extra` adds the per-topic-only fields of its subscription."""
        rate, size = float(g.rate[t]), float(self.shape.msg_size[t])
        backlog = int(g.backlog[t])
        kind = self.sub_type[t]
        sub = (
            f'{{"consumers":[{",".join(consumers)}],"msgBacklog":{backlog},'
            f'"msgRateExpired":0.0,"msgRateOut":{rate:.3f},"messageAckRate":{rate:.3f},'
            f'"msgThroughputOut":{rate * size:.3f},"msgRateRedeliver":0.0,'
            f'"numberOfEntriesSinceFirstNotAckedMessage":{backlog + 1},'
            f'"totalNonContiguousDeletedMessagesRange":0,"type":"{kind}",'
            '"filterProcessedMsgCount":0,"filterAcceptedMsgCount":0,'
            '"filterRejectedMsgCount":0,"filterRescheduledMsgCount":0,'
            f'"blockedSubscriptionOnUnackedMsgs":false,"unackedMessages":0{extra}}}'
        )
        publishers = (
            f'{{"accessMode":"Shared","msgRateIn":{rate:.3f},"msgThroughputIn":{rate * size:.3f},'
            f'"averageMsgSize":{size:.1f},"producerId":0,"producerName":"producer-{t}",'
            f'"address":"/10.1.{t % 250}.1:5000","connectedSince":"{_since(0)}",'
            '"clientVersion":"Pulsar-Java-v4.0.7","metadata":{}}'
            if rate > 0
            else ""
        )
        return (
            f'{{"publishers":[{publishers}],"replication":{{}},'
            f'"subscriptions":{{"{self.sub_name[t]}":{sub}}},'
            f'"producerCount":{1 if rate > 0 else 0},"averageMsgSize":{size:.1f},'
            f'"msgRateIn":{rate:.3f},"msgRateOut":{rate:.3f},"msgInCount":{backlog * 7},'
            f'"bytesInCount":{int(backlog * 7 * size)},"msgOutCount":{backlog * 6},'
            f'"bytesOutCount":{int(backlog * 6 * size)},"msgThroughputIn":{rate * size:.3f},'
            f'"msgThroughputOut":{rate * size:.3f},"storageSize":{int(backlog * 7 * size)},'
            f'"backlogSize":{int(backlog * size)},"pendingAddEntriesCount":0,'
            '"filteredEntriesCount":0}'
        )

    def _present(self, t: int, g: Generation) -> list[int]:
        return [c for c in range(int(self.first[t]), int(self.first[t + 1])) if g.present[c]]

    def _fragment(self, t: int, g: Generation) -> bytes:
        here = self._present(t, g)
        each = float(g.rate[t]) / max(1, len(here))
        size = float(self.shape.msg_size[t])
        consumers = [self._consumer_json(c, int(g.since[c]), each, size) for c in here]
        return f'"{self.names[t]}":{self._stats_json(t, g, consumers)}'.encode()

    def _render(self, number: int, *, changed: np.ndarray | None, **state: Any) -> Generation:
        started, cpu = time.perf_counter(), time.thread_time()
        g = Generation(number=number, bulk={}, owned={}, **state)
        todo = range(len(self.names)) if changed is None else changed
        if changed is None:
            self.fragments = [b""] * len(self.names)
        for t in todo:
            self.fragments[int(t)] = self._fragment(int(t), g)
        # each broker's body written once, fragment by fragment: one copy of the JSON
        bodies = [io.BytesIO() for _ in self.brokers]
        opened: list[str | None] = [None] * len(self.brokers)
        owned: list[dict[str, Any]] = [{} for _ in self.brokers]
        status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
        for b, topics in enumerate(self.of_bundle):
            broker, ns = int(g.owner[b]), self.bundle_ns[b]
            owned[broker][f"{ns}/{self.bundle_name[b]}"] = status
            if not len(topics):
                continue
            out = bodies[broker]
            if opened[broker] != ns:
                out.write(b"{" if opened[broker] is None else b"},")
                out.write(b'"%s":{' % ns.encode())
                opened[broker] = ns
            else:
                out.write(b",")
            out.write(b'"%s":{"persistent":{' % self.bundle_name[b].encode())
            for i, t in enumerate(topics):
                if i:
                    out.write(b",")
                out.write(self.fragments[int(t)])
            out.write(b"}}")
        for b, broker_id in enumerate(self.brokers):
            bodies[b].write(b"{}" if opened[b] is None else b"}}")
            g.bulk[broker_id] = bodies[b].getvalue()
            g.owned[broker_id] = json.dumps(owned[b]).encode()
        del bodies
        g.render_cpu = time.thread_time() - cpu
        g.render_wall = time.perf_counter() - started
        return g

    def _step(self, g: Generation) -> Generation:
        """The generation after `g`: a `change` share of the topics changes, one bundle moves."""
        s, rng = self.shape, self.rng
        changed = np.flatnonzero(rng.random(len(self.names)) < self.change)
        rate, backlog = g.rate.copy(), g.backlog.copy()
        rate[changed] = s.base_rate[changed] * rng.lognormal(0.0, 0.5, size=len(changed))
        backlog[changed] = rng.integers(0, 5000, size=len(changed)) * (rate[changed] > 0)
        present, since = g.present.copy(), g.since.copy()
        sizes = np.diff(self.first)
        consumers = (
            np.concatenate([np.arange(self.first[t], self.first[t + 1]) for t in changed])
            if len(changed)
            else np.empty(0, dtype=np.int64)
        )
        flip = consumers[rng.random(len(consumers)) < LEAVE_SHARE]
        present[flip] = ~present[flip]
        since[flip[present[flip]]] = g.number + 1
        active = g.active.copy()
        for t in changed:  # the active consumer left: the next connected one takes over
            if active[t] >= 0 and not present[self.first[t] + active[t]]:
                here = [k for k in range(int(sizes[t])) if present[self.first[t] + k]]
                active[t] = here[0] if here else active[t]
        owner = g.owner.copy()
        if len(self.brokers) > 1:
            b = int(rng.integers(len(owner)))
            owner[b] = (owner[b] + 1 + rng.integers(len(self.brokers) - 1)) % len(self.brokers)
        return self._render(
            g.number + 1,
            owner=owner,
            present=present,
            active=active,
            rate=rate,
            backlog=backlog,
            since=since,
            changed=changed,
        )

    # --- per-topic stats ---------------------------------------------------------------------

    def topic_stats(self, topic: str, g: Generation) -> bytes | None:
        """GET .../{topic}/stats of generation `g`: the bulk object plus what only it has."""
        t = self.index.get(topic)
        if t is None:
            return None
        here = self._present(t, g)
        each = float(g.rate[t]) / max(1, len(here))
        size = float(self.shape.msg_size[t])
        kind = self.sub_type[t]
        consumers = []
        for k, c in enumerate(here):
            text = self._consumer_json(c, int(g.since[c]), each, size)[:-1]
            if kind == "Key_Shared":
                ranges = ",".join(f"[{a},{b}]" for a, b in self._ranges(c))
                draining = self._draining(t, k, g)
                text += (
                    f',"keyHashRangeArrays":[{ranges}],"drainingHashesCount":{len(draining)},'
                    f'"drainingHashesUnackedMessages":{sum(d[1] for d in draining)},'
                    '"drainingHashes":['
                    + ",".join(
                        f'{{"hash":{h},"unackMsgs":{u},"blockedAttempts":{a}}}'
                        for h, u, a in draining
                    )
                    + "]"
                )
            consumers.append(text + "}")
        extra = ""
        if kind == "Key_Shared":
            extra = f',"keySharedMode":"{self.sub_mode[t]}","allowOutOfOrderDelivery":false'
        elif g.active[t] >= 0 and g.present[self.first[t] + g.active[t]]:
            extra = f',"activeConsumerName":"{self.consumer[self.first[t] + g.active[t]]}"'
        stats = self._stats_json(t, g, consumers, extra)
        return (stats[:-1] + f',"ownerBroker":"{self.owner_of(t, g)}"}}').encode()

    def _draining(self, t: int, k: int, g: Generation) -> list[tuple[int, int, int]]:
        """A consumer of a Key_Shared topic with a backlog drains a few hashes of its range
        (the first consumer of every third such topic)."""
        if k != 0 or g.backlog[t] == 0 or t % 3:
            return []
        c = self._present(t, g)[0]
        ranges = self._ranges(c)
        if not ranges:
            return []
        low, high = ranges[0]
        step = max(1, (high - low) // 8)
        return [(h, 1 + (h + g.number) % 3, 1) for h in range(low, high + 1, step)][:5]

    def _ranges(self, c: int) -> list[tuple[int, int]]:
        at, to = int(self.range_at[c]), int(self.range_at[c + 1])
        return [
            (int(a), int(b))
            for a, b in zip(self.range_start[at:to], self.range_end[at:to], strict=True)
        ]

    def owner_of(self, t: int, g: Generation) -> str:
        return self.brokers[int(g.owner[int(self.shape.bundle_of[t])])]

    @property
    def index(self) -> dict[str, int]:
        found = getattr(self, "_index", None)
        if found is None:
            found = self._index = {name: t for t, name in enumerate(self.names)}
        return found

    # --- generations ----------------------------------------------------------------------

    def prepare_next(self) -> None:
        """Render the generation after the current one (on a background thread)."""
        with self.lock:
            current = self.current
        following = self._step(current)
        with self.ready:
            self.next, self.rendering = following, False
            self.ready.notify_all()

    def render_next(self) -> bool:
        """Start rendering the next generation unless it is rendered or under way; whether
        one was started."""
        with self.lock:
            if self.next is not None or self.rendering:
                return False
            self.rendering = True
        threading.Thread(target=self.prepare_next, name="render", daemon=True).start()
        return True

    def start_of_poll(self) -> None:
        """A poll began (it asked for the clusters): after a poll read the bulk answers, move
        to the next generation, waiting for its rendering if need be, and render the one
        after in the background."""
        with self.ready:
            if not self.bulk_read:
                return
        if self.render_on_request:
            self.render_next()  # asked for too late, or not at all: the poll waits for it
        with self.ready:
            if not self.bulk_read:  # another request moved on meanwhile
                return
            started = time.perf_counter()
            if not self.ready.wait_for(lambda: self.next is not None, timeout=3600):
                raise RuntimeError("the next generation was not rendered within an hour")
            waited = time.perf_counter() - started
            self.served.waited += waited
            assert self.next is not None
            self.current, self.next, self.bulk_read = self.next, None, False
            self.history.append({**self._summary(self.current), "waited_seconds": round(waited, 3)})
        if not self.render_on_request:
            self.render_next()

    def _summary(self, g: Generation) -> dict[str, Any]:
        """What generation `g` holds (and, with `manifests`, its manifest kept)."""
        if self.keep_manifests:
            self._keep_manifest(g)
        return {
            "generation": g.number,
            "topics": len(self.names),
            "subscriptions": len(self.names),
            "consumers": int(g.present.sum()),
            "bulk_bytes": sum(len(v) for v in g.bulk.values()),
            "largest_body": max(len(v) for v in g.bulk.values()),
            "render_cpu_seconds": round(g.render_cpu, 3),
            "render_wall_seconds": round(g.render_wall, 3),
        }

    def _keep_manifest(self, g: Generation) -> None:
        """What generation `g` serves: its topics, subscriptions and connected consumers."""
        consumers = [
            [self.names[t], self.sub_name[t], self.consumer[c]]
            for t in range(len(self.names))
            for c in self._present(t, g)
        ]
        self.manifests[g.number] = {
            "topics": self.names,
            "subscriptions": [[n, s] for n, s in zip(self.names, self.sub_name, strict=True)],
            "consumers": consumers,
        }


# --- HTTP ------------------------------------------------------------------------------------

Answer = tuple[int, bytes, str]
STATS = re.compile(r"^/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/stats$")
PARTITIONS = re.compile(r"^/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)/partitions$")
OWNED = re.compile(r"^/admin/v2/brokers/([^/]+)/([^/]+)/ownedNamespaces$")
JSON = "application/json"


def not_found(reason: str) -> Answer:
    return 404, json.dumps({"reason": reason}).encode(), JSON


def answer(cluster: SynthCluster, broker: str, path: str, query: str) -> tuple[str, Answer]:
    """(the family the request counts under, the answer) of one GET to `broker`."""
    g = cluster.current
    static = cluster._static.get(path)
    if path == "/admin/v2/clusters":
        cluster.start_of_poll()
        return "clusters", (200, static or b"[]", JSON)
    if static is not None:
        return path.split("/")[3], (200, static, JSON)
    if path == "/admin/v2/broker-stats/topics":
        with cluster.lock:
            cluster.bulk_read = True
        return "broker_topic_stats", (200, g.bulk[broker], JSON)
    if path == "/admin/v2/broker-stats/load-report":
        return "load_report", (204, b"", JSON)  # NoopLoadManager keeps no report
    if path == "/admin/v2/broker-stats/metrics":
        metrics = [{"dimensions": {"broker": broker}, "metrics": {"brk_lb_unload_bundle_total": 0}}]
        return "lb_metrics", (200, json.dumps(metrics).encode(), JSON)
    if path == "/admin/v2/brokers/version":
        return "version", (200, VERSION.encode(), "text/plain")
    if m := OWNED.match(path):
        body = g.owned.get(unquote(m.group(2)))
        if m.group(1) != CLUSTER or body is None:
            return "not_found", not_found("Broker not found")
        return "owned_namespaces", (200, body, JSON)
    if m := STATS.match(path):
        topic = "persistent://" + "/".join(unquote(p) for p in m.groups())
        body = cluster.topic_stats(topic, g)
        if body is None:
            return "not_found", not_found("Topic not found")
        return "topic_stats", (200, body, JSON)
    if m := PARTITIONS.match(path):
        topic = "persistent://" + "/".join(unquote(p) for p in m.groups())
        count = 0 if topic in cluster.index else None
        if count is None:
            return "not_found", not_found("Topic not found")
        return "partitions", (200, json.dumps({"partitions": count}).encode(), JSON)
    if path == "/__synth/render":
        started = cluster.render_next()
        return "control", (200, json.dumps({"started": started}).encode(), JSON)
    if path == "/__synth/stats":
        return "control", (200, json.dumps(stats_of(cluster)).encode(), JSON)
    if path == "/__synth/manifest":
        wanted = int(parse_qs(query).get("generation", ["-1"])[0])
        found = cluster.manifests.get(wanted)
        if found is None:
            return "control", not_found(f"no manifest of generation {wanted} (--manifests)")
        return "control", (200, json.dumps(found).encode(), JSON)
    return "not_found", not_found("HTTP 404 Not Found")


def stats_of(cluster: SynthCluster) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "generation": cluster.current.number,
        "generations": cluster.history,
        "requests": cluster.served.requests,
        "not_found": cluster.served.not_found,
        "bytes_sent": cluster.served.bytes_sent,
        "waited_for_rendering_seconds": round(cluster.served.waited, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def handler_for(cluster: SynthCluster, broker: Callable[[], str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body leave at once, no 40 ms wait

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            try:
                family, (status, body, kind) = answer(cluster, broker(), parts.path, parts.query)
            except Exception as exc:  # a bug here is a 500 the collector records, never a hang
                family, (status, body, kind) = "error", (500, str(exc).encode(), "text/plain")
            with cluster.lock:
                served = cluster.served
                served.requests[family] = served.requests.get(family, 0) + 1
                if status == 404:
                    served.not_found[parts.path] = served.not_found.get(parts.path, 0) + 1
                served.bytes_sent += len(body)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(memoryview(body))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve(
    topics: int,
    brokers: int,
    change: float,
    seed: int,
    *,
    manifests: bool,
    render_on_request: bool = False,
) -> None:
    servers = [
        ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) for _ in range(brokers)
    ]
    ids = [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    started, cpu = time.perf_counter(), time.process_time()
    cluster = SynthCluster(
        topics,
        ids,
        change=change,
        seed=seed,
        manifests=manifests,
        render_on_request=render_on_request,
    )
    cluster.index  # noqa: B018 -- built once, before any poll asks
    first = cluster.history[0]
    for server, broker_id in zip(servers, ids, strict=True):
        server.RequestHandlerClass = handler_for(cluster, lambda b=broker_id: b)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    if not render_on_request:
        cluster.render_next()
    print(
        json.dumps(
            {
                "admin_url": f"http://{ids[0]}",
                "brokers": ids,
                "setup_seconds": round(time.perf_counter() - started, 3),
                "setup_cpu_seconds": round(time.process_time() - cpu, 3),
                **first,
            }
        ),
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    for server in servers:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--brokers", type=int, default=None, help="default: 1 per 50,000 topics, ≥ 3")
    p.add_argument("--change", type=float, default=0.1, help="share of topics changing a poll")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--manifests", action="store_true", help="keep what each generation served")
    p.add_argument(
        "--render-on-request",
        action="store_true",
        help="render the next generation only on GET /__synth/render (or when a poll needs it)",
    )
    args = p.parse_args(argv)
    brokers = args.brokers or default_brokers(args.topics)
    serve(
        args.topics,
        brokers,
        args.change,
        args.seed,
        manifests=args.manifests,
        render_on_request=args.render_on_request,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
