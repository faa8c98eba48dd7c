"""The poll through a slow, flaky, lying admin API: a loopback proxy (tests/faults/flaky_proxy.py)
in front of the live broker delays, resets, answers 502/503 (with and without Retry-After),
truncates bodies and answers HTML with 200, at seeded rates; or never answers one endpoint.

For every poll, in-process `poll()` and `pulsar-lens collect`, these hold:
- it ends by its deadline (wall time at most the deadline plus MARGIN);
- no path is asked more than 1 + RETRIES times, a retry follows only a fault worth retrying
  (a reset, a truncated body, 502, 503), and the wait before it is at least the backoff (or
  the Retry-After);
- a faulted endpoint is an error of the snapshot, one line naming its path and what went wrong;
  every error is such a fault or a call the deadline left out;
- what an endpoint answered is in the snapshot as the direct poll has it.
With no faults the snapshot through the proxy is the direct one. The figures of each run go to
artifacts/reliability/flaky-admin.json.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulsar as pulsar_client
import pytest
import requests

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.admin_transport import MAX_BACKOFF
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core import logs
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.faults.flaky_proxy import FAULTS, FlakyProxy, Seen
from tests.lens_cli import ROOT, run_lens

RETRIES = 3
BACKOFF = 0.2
CALL_TIMEOUT = 1.0  # seconds per read, in-process
DEADLINE = 1.5  # seconds a poll may take, in-process
CLI_DEADLINE = 2.0  # PULSAR_LENS_POLL_DEADLINE of the collect runs (their per-read timeout is 10s)
MARGIN = 1.0  # seconds past the deadline a poll may end (joining its threads, building it)
GAP_SLACK = 0.05  # seconds the measured wait before a retry may fall short of the backoff
RATE = 0.4  # the rate of the one fault of each per-fault run
POLLS = 2  # polls per fault
MIXED = {fault: 0.06 for fault in FAULTS}  # every fault at once: 48% of requests
RETRY_AFTER = 1  # seconds: a wait the per-fault runs can afford before their deadline
LONG_RETRY_AFTER = 3  # seconds: a wait past the deadline (mixed runs): no retry, no overrun
RETRYABLE = {"reset_before", "reset_after", "502", "503", "503_retry", "truncate"}
SAYS = {  # what the error of a fault must say
    "reset_before": "reset",
    "reset_after": "reset",
    "502": "502",
    "503": "503",
    "503_retry": "503",
    "truncate": "truncated",
    "html200": "not JSON|HTML page",
    "stall": "deadline",
}
LEFT_OUT = "deadline"  # what the error of a call the deadline cut or left out says
LATE = 0.5  # seconds before the deadline in which a call may be cut by it rather than its fault
STALLED = "/admin/v2/broker-stats/topics"
SYSTEM = "/__"  # the broker's own topics, e.g. __change_events
REPORT = ROOT / "artifacts" / "reliability" / "flaky-admin.json"
FIGURES: dict[str, Any] = {}


@dataclass
class Lab:
    broker: LocalPulsar
    namespace: str
    direct: Snapshot

    @property
    def plain(self) -> str:
        return f"persistent://{self.namespace}/plain"


@pytest.fixture(scope="module")
def lab(pulsar: LocalPulsar) -> Iterator[Lab]:
    """A namespace with a Key_Shared topic (two consumers: per-topic stats are asked) and a
    partitioned topic with a Shared subscription; polled directly once all is seen."""
    namespace = f"public/flaky-{uuid.uuid4().hex[:8]}"
    base = pulsar.admin_url
    resp = requests.put(f"{base}/admin/v2/namespaces/{namespace}", timeout=30)
    assert resp.status_code < 300, resp.text
    resp = requests.put(
        f"{base}/admin/v2/persistent/{namespace}/parted/partitions", json=2, timeout=30
    )
    assert resp.status_code < 300, resp.text
    client = logs.pulsar_client(pulsar.service_url, operation_timeout_seconds=30)
    consumers = [
        client.subscribe(
            f"persistent://{namespace}/plain",
            "ks",
            consumer_type=pulsar_client.ConsumerType.KeyShared,
            consumer_name=f"ks-{i}",
        )
        for i in range(2)
    ]
    consumers.append(
        client.subscribe(
            f"persistent://{namespace}/parted",
            "sh",
            consumer_type=pulsar_client.ConsumerType.Shared,
            consumer_name="sh-1",
        )
    )
    try:
        direct = _settled(pulsar.admin_url, namespace)
        FIGURES.clear()
        yield Lab(pulsar, namespace, direct)
    finally:
        client.close()
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        settings = {
            "retries": RETRIES,
            "backoff_s": BACKOFF,
            "max_backoff_s": MAX_BACKOFF,
            "retry_after_s": RETRY_AFTER,
            "call_timeout_s": CALL_TIMEOUT,
            "deadline_s": DEADLINE,
            "cli_deadline_s": CLI_DEADLINE,
            "margin_s": MARGIN,
        }
        REPORT.write_text(json.dumps({"settings": settings, **FIGURES}, indent=2) + "\n")


def _settled(admin_url: str, namespace: str) -> Snapshot:
    """The direct poll once the bulk stats show every subscription with its consumers (they
    are rebuilt every 2s), all three topics and both Key_Shared consumers' hash ranges."""
    mine = {f"persistent://{namespace}/{t}" for t in ("plain", "parted-partition-0")}
    deadline = time.monotonic() + 60
    while True:
        with AdminClient(admin_url) as client:
            snap = poll(client, namespaces=[namespace])
        subs = {(s.subscription, s.consumer_count) for s in snap.subscriptions}
        ranged = [c for c in snap.consumers if c.subscription == "ks" and c.hash_ranges]
        topics = {t.topic for t in snap.topics}
        if {("ks", 2), ("sh", 1)} <= subs and len(ranged) == 2 and mine <= topics:
            assert not snap.errors, snap.errors
            return snap
        assert time.monotonic() < deadline, f"the broker never showed the setup: {snap}"
        time.sleep(0.5)


# --- what a snapshot holds, comparable through the proxy --------------------------------------


def _view(snap: Snapshot, proxy: FlakyProxy | None) -> dict[str, set[tuple[Any, ...]]]:
    """The stable parts of each table (no rates or times; not the broker's system topics,
    whose readers come and go), the proxy's address made the broker's."""

    def b(text: str | None) -> str | None:
        return text.replace(proxy.netloc, proxy.upstream_netloc) if text and proxy else text

    return {
        "brokers": {(b(r.broker_id), r.version, r.is_leader) for r in snap.brokers},
        "bundles": {
            (r.namespace, r.bundle, r.lower, r.upper, b(r.owner_broker)) for r in snap.bundles
        },
        "topics": {
            (r.topic, r.partitioned_topic, r.partition_index, r.bundle, b(r.owner_broker))
            for r in snap.topics
            if SYSTEM not in r.topic
        },
        "subscriptions": {
            (r.topic, r.subscription, r.type, r.consumer_count, r.key_shared_mode)
            for r in snap.subscriptions
            if SYSTEM not in r.topic
        },
        "consumers": {
            (r.topic, r.subscription, r.consumer_name)
            for r in snap.consumers
            if SYSTEM not in r.topic
        },
        "hash_ranges": {(r.consumer_name, r.hash_ranges) for r in snap.consumers if r.hash_ranges},
    }


# --- the checks every poll passes -------------------------------------------------------------


def _error_path(endpoint: str) -> str:
    """The path an EndpointError names ("GET /admin/..." or "GET http://host:port/admin/...")."""
    if " " not in endpoint:  # a family's note, e.g. "topic_stats"
        return endpoint
    target = endpoint.split(" ", 1)[1]
    return urlsplit(target).path if "://" in target else target.split("?")[0]


Faulted = dict[str, tuple[str, int]]  # path -> (the fault of its last attempt, attempts)


def check_attempts(
    seen: list[Seen], retry_after: float
) -> tuple[Faulted, set[str], dict[str, int]]:
    """Bounded retries, each after a fault worth one and at least the backoff (or the
    Retry-After) after the last attempt. Returns the paths whose last attempt was a fault,
    the paths answered faithfully, and the counts."""
    attempts: dict[str, list[Seen]] = defaultdict(list)
    for s in seen:
        attempts[f"{s.path}?{s.query}"].append(s)
    faulted: Faulted = {}
    answered: set[str] = set()
    for target, tries in attempts.items():
        assert len(tries) <= 1 + RETRIES, f"{target} asked {len(tries)} times in one poll"
        for k, (one, nxt) in enumerate(itertools.pairwise(tries)):
            assert one.fault in RETRYABLE, f"{target} retried after {one.fault or 'an answer'}"
            wait = min(BACKOFF * 2**k, MAX_BACKOFF)
            if one.fault == "503_retry":
                wait = min(max(wait, retry_after), MAX_BACKOFF)
            gap = nxt.at - one.at
            assert gap >= wait - GAP_SLACK, f"{target}: retried {gap:.3f}s after, not {wait}s"
        last = tries[-1]
        if last.fault in ("", "delay"):
            answered.add(last.path)
        else:
            faulted[last.path] = (last.fault, len(tries))
    counts = {
        "requests": len(seen),
        "retries": len(seen) - len(attempts),
        "faulted_requests": sum(1 for s in seen if s.fault),
    }
    return faulted, answered, counts


def check_errors(faulted: Faulted, late: set[str], errors: list[tuple[str, str]]) -> set[str]:
    """Each fault an endpoint was left with is its error, naming its call and saying in one line
    what went wrong (or, for a call made in the poll's last moments, that the deadline cut
    it); one worth retrying was retried RETRIES times, unless the deadline came first; every
    other error is a call the poll's deadline cut or left out. Returns the paths with an
    error."""
    named: dict[str, str] = {}
    for endpoint, message in errors:
        path = _error_path(endpoint)
        assert "\n" not in message and "Traceback" not in message, message
        # the error names its call in `endpoint`; its message says what went wrong after it
        assert endpoint.strip() and message.strip(), (endpoint, message)
        named.setdefault(path, message)
    for path, (fault, asked) in faulted.items():
        assert path in named, f"{path} got {fault} and the snapshot has no error for it"
        said = named[path]
        assert re.search(SAYS[fault], said) or (path in late and LEFT_OUT in said), (fault, said)
        if fault in RETRYABLE:
            assert asked == 1 + RETRIES or LEFT_OUT in said, (f"asked {asked} times", said)
    for path, message in named.items():
        assert path in faulted or LEFT_OUT in message, message
    return set(named)


def _late(seen: list[Seen], started: float, deadline: float) -> set[str]:
    """Paths last asked in the poll's last LATE seconds (`started` is time.time())."""
    last = {s.path: s.wall for s in seen}
    return {path for path, wall in last.items() if wall >= started + deadline - LATE}


def check_poll(
    lab: Lab,
    proxy: FlakyProxy,
    snap: Snapshot,
    seen: list[Seen],
    took: float,
    deadline: float,
    started: float,
) -> dict[str, int]:
    """Assert the properties of one poll through the proxy (begun at time.time() `started`);
    its counts."""
    assert took <= deadline + MARGIN, f"a poll took {took:.2f}s with a {deadline}s deadline"
    faulted, answered, counts = check_attempts(seen, proxy.retry_after)
    assert snap.partial == bool(snap.errors)
    errors = [(e.endpoint, e.message) for e in snap.errors]
    failed = check_errors(faulted, _late(seen, started, deadline), errors)
    check_kept(lab, proxy, snap, answered - failed)
    return {**counts, "errors": len(snap.errors)}


def check_kept(lab: Lab, proxy: FlakyProxy, snap: Snapshot, answered: set[str]) -> None:
    """What an endpoint answered is in the snapshot, as in the direct one."""
    got, want = _view(snap, proxy), _view(lab.direct, None)
    ns = lab.namespace
    stats = lab.plain.replace("persistent://", "/admin/v2/persistent/") + "/stats"
    kept = {  # endpoint(s) -> (what the snapshot has, what the direct one has) of their data
        (f"/admin/v2/persistent/{ns}", f"/admin/v2/persistent/{ns}/partitioned"): (
            {t[0] for t in got["topics"]} >= {t[0] for t in want["topics"]}
        ),
        ("/admin/v2/broker-stats/topics",): (
            {s[:3] for s in got["subscriptions"]} >= {s[:3] for s in want["subscriptions"]}
        ),
        (f"/admin/v2/namespaces/{ns}/bundles",): (
            {b[:4] for b in got["bundles"]} == {b[:4] for b in want["bundles"]}
        ),
        ("/admin/v2/brokers/standalone",): (
            {b[0] for b in got["brokers"]} == {b[0] for b in want["brokers"]}
        ),
        (stats,): got["hash_ranges"] == want["hash_ranges"],
    }
    lost = [paths for paths, same in kept.items() if set(paths) <= answered and not same]
    assert not lost, f"answered, yet not in the snapshot as polled directly: {lost}\n{got}"


@dataclass
class Polled:
    snap: Snapshot
    seen: list[Seen]  # the requests the proxy saw, in order
    took: float  # seconds
    started: float  # time.time()


def _poll(
    proxy: FlakyProxy, lab: Lab, *, timeout: float = CALL_TIMEOUT, deadline: float = DEADLINE
) -> Polled:
    proxy.clear()
    with AdminClient(proxy.url, timeout=timeout, retries=RETRIES, backoff=BACKOFF) as client:
        started, wall = time.monotonic(), time.time()
        snap = poll(client, namespaces=[lab.namespace], timeout=timeout, deadline=deadline)
        took = time.monotonic() - started
    settle = time.monotonic() + 2  # the proxy's threads may record the last ones a bit later
    while len(proxy.seen) < snap.requests and time.monotonic() < settle:
        time.sleep(0.02)
    seen = proxy.clear()
    assert snap.requests == len(seen)  # every request sent reached the proxy, no more
    return Polled(snap, seen, took, wall)


def _checked(lab: Lab, proxy: FlakyProxy, p: Polled) -> tuple[float, dict[str, int]]:
    return p.took, check_poll(lab, proxy, p.snap, p.seen, p.took, DEADLINE, p.started)


def _tally(runs: list[tuple[float, dict[str, int]]], deadline: float) -> dict[str, Any]:
    return {
        "polls": len(runs),
        "requests": sum(c["requests"] for _, c in runs),
        "retries": sum(c["retries"] for _, c in runs),
        "faulted_requests": sum(c["faulted_requests"] for _, c in runs),
        "errors": sum(c["errors"] for _, c in runs),
        "worst_poll_s": round(max(t for t, _ in runs), 3),
        "deadline_s": deadline,
    }


# --- the tests --------------------------------------------------------------------------------


def test_with_no_faults_the_snapshot_through_the_proxy_is_the_direct_one(lab: Lab) -> None:
    with FlakyProxy(lab.broker.admin_url) as proxy:
        p = _poll(proxy, lab)
    assert not p.snap.errors, p.snap.errors
    assert _view(p.snap, proxy) == _view(lab.direct, None)
    assert p.snap.requests == lab.direct.requests
    assert all(s.fault == "" for s in p.seen)
    FIGURES["no_faults"] = {"polls": 1, "requests": len(p.seen), "poll_s": round(p.took, 3)}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_leaves_a_bounded_honest_partial_poll(lab: Lab, fault: str) -> None:
    runs = []
    with FlakyProxy(lab.broker.admin_url, delay=0.4, retry_after=RETRY_AFTER) as proxy:
        for seed in range(POLLS):
            proxy.configure({fault: RATE}, seed=seed)
            runs.append(_checked(lab, proxy, _poll(proxy, lab)))
    tally = _tally(runs, DEADLINE)
    assert tally["faulted_requests"] > 0, f"the seeds drew no {fault}"
    FIGURES.setdefault("faults", {})[fault] = {"rate": RATE, "seeds": list(range(POLLS)), **tally}


def test_every_fault_at_once(lab: Lab) -> None:
    runs = []
    with FlakyProxy(lab.broker.admin_url, delay=0.4, retry_after=LONG_RETRY_AFTER) as proxy:
        for seed in range(100, 104):
            proxy.configure(MIXED, seed=seed)
            runs.append(_checked(lab, proxy, _poll(proxy, lab)))
    FIGURES["mixed"] = {
        "rates": MIXED,
        "seeds": [100, 101, 102, 103],
        "retry_after_s": LONG_RETRY_AFTER,
        **_tally(runs, DEADLINE),
    }


def test_an_endpoint_that_never_answers_ends_with_the_deadline(lab: Lab) -> None:
    with FlakyProxy(lab.broker.admin_url, stall=[STALLED]) as proxy:
        p = _poll(proxy, lab, timeout=30.0)  # a per-read timeout far past the deadline
    took, counts = _checked(lab, proxy, p)
    stalled = [e for e in p.snap.errors if STALLED in e.endpoint]
    assert len(stalled) == 1 and "deadline" in stalled[0].message, p.snap.errors
    assert sum(1 for s in p.seen if s.path == STALLED) == 1  # a timeout is not retried
    FIGURES["stall"] = {
        "path": STALLED,
        "call_timeout_s": 30.0,
        "polls": 1,
        **counts,
        "worst_poll_s": round(took, 3),
        "deadline_s": DEADLINE,
    }


BEAT = re.compile(r"^poll \S+ .*requests=(\d+) errors=(\d+) duration=([\d.]+)s", re.M)


def test_collect_through_the_flaky_proxy_stays_bounded_and_says_what_failed(
    lab: Lab, tmp_path: Path
) -> None:
    """The real command, every fault at once and one endpoint that never answers; its own
    per-read timeout (10s) is past its poll deadline."""
    store = tmp_path / "store"
    with FlakyProxy(
        lab.broker.admin_url,
        rates=MIXED,
        seed=7,
        delay=0.4,
        retry_after=LONG_RETRY_AFTER,
        stall=["/load-report"],
    ) as proxy:
        env = {"PULSAR_ADMIN_URL": proxy.url, "PULSAR_LENS_POLL_DEADLINE": f"{CLI_DEADLINE:g}s"}
        args = ["--store", str(store), "--namespace", lab.namespace]
        done = run_lens("collect", "--max-polls", "2", "--interval", "1s", *args, env=env)
        seen = proxy.clear()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    beats = BEAT.findall(done.stdout)
    assert len(beats) == 2, done.stdout
    index = Store(store).snapshots()
    assert len(index) == 2
    starts = [t.timestamp() for t in index["collected_at"]] + [float("inf")]
    runs = []
    for i, (requests_, errors, duration) in enumerate(beats):
        snap_errors = json.loads(index["errors_json"].iloc[i])
        assert int(errors) == len(snap_errors) > 0  # the heartbeat counts the stored errors
        assert bool(index["partial"].iloc[i])
        mine = [s for s in seen if starts[i] <= s.wall < starts[i + 1]]
        assert int(requests_) == len(mine)
        took = float(duration)
        runs.append((took, _check_cli_poll(mine, snap_errors, took, starts[i], proxy.retry_after)))
        load = [e for e in snap_errors if "/load-report" in e["endpoint"]]
        assert len(load) == 1 and "deadline" in load[0]["message"], snap_errors
    for line in done.stderr.splitlines():  # each failure logged as one line naming its path
        if " poll: " in line and " call(s) not made: the poll's deadline " not in line:
            assert re.search(r"(GET|topic_stats) \S+", line), line  # (calls never made: counted)
    FIGURES["cli"] = {
        "rates": MIXED,
        "seed": 7,
        "retry_after_s": LONG_RETRY_AFTER,
        "stalled": "/admin/v2/broker-stats/load-report",
        "call_timeout_s": 10.0,
        **_tally(runs, CLI_DEADLINE),
    }


def _check_cli_poll(
    seen: list[Seen], errors: list[dict[str, Any]], took: float, started: float, retry_after: int
) -> dict[str, int]:
    """The checks of `check_poll` on one poll of the command (its errors as stored)."""
    assert took <= CLI_DEADLINE + MARGIN, f"a collect poll took {took:.2f}s"
    faulted, _, counts = check_attempts(seen, retry_after)
    late = _late(seen, started, CLI_DEADLINE)
    check_errors(faulted, late, [(e["endpoint"], e["message"]) for e in errors])
    return {**counts, "errors": len(errors)}
