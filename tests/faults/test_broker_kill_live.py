"""Brokers SIGKILLed under a running `pulsar-lens collect`.

A single broker killed in the middle of a poll: the loop goes on, every failed poll is said
(heartbeat and its errors), the Overview calls the data stale with its age, /metrics counts the
failures and the growing age; the broker started again on the same ports and data is polled
again by the same collector, with no restart of it.

One broker of two killed (a modular load manager cluster; the one that is not the leader): the
polls are partial and name the dead broker, and the bundles it owned are stored moving to the
survivor.

The figures (polls failed, seconds to recover, bundles moved and when) are written to
artifacts/broker-kill.json.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from streamlit.testing.v1 import AppTest

from pulsar_lens.collectors.brokers import parse_leader
from pulsar_lens.collectors.namespaces import bundle_for, parse_boundaries
from pulsar_lens.core import logs
from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.bundle_ownership import BundleOwnership
from tests.brokers import CLUSTER_SETTINGS, BrokerPool
from tests.lens_cli import clean_environ
from tests.live.lens_polls import wait_for

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
FIGURES = ROOT / "artifacts" / "broker-kill.json"
INTERVAL = 1.0  # seconds between polls of the collectors here
PAGE_INTERVAL = 20.0  # what the page expects after the recovery: stale after a minute
SNAPSHOT_SHOWN = re.compile(r"snapshot (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC")
BEAT = re.compile(
    r"^poll (?P<at>\S+)(?: cluster=\S+)? topics=(?P<topics>\d+) subs=\d+ "
    r"requests=(?P<requests>\d+) errors=(?P<errors>\d+) duration=(?P<duration>[\d.]+)s"
    r"(?P<rest>.*)$"
)
T = TypeVar("T")
_figures: dict[str, Any] = {}


@dataclass(frozen=True)
class Beat:
    """One heartbeat line of the collector, with when this test read it."""

    seen: float  # time.monotonic() when the line was read
    at: dt.datetime  # the poll's start (to the second)
    requests: int
    errors: int
    duration: float
    line: str

    @property
    def unreachable(self) -> bool:
        return " unreachable" in self.line

    @property
    def good(self) -> bool:
        return not self.unreachable and self.errors == 0 and "not_stored" not in self.line


class Collector:
    """`pulsar-lens collect` in a subprocess; its output lines read as they come."""

    def __init__(self, admin_url: str, store: Path, *extra: str) -> None:
        self.metrics_port = free_port()
        argv = [sys.executable, "-m", "pulsar_lens.cli.main", "collect", "--admin-url", admin_url]
        argv += ["--store", str(store), "--interval", f"{INTERVAL:g}s"]
        argv += ["--metrics-port", str(self.metrics_port), *extra]
        env = clean_environ()
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**env, "PYTHONFAULTHANDLER": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.beats: list[Beat] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        self._readers = [
            threading.Thread(target=self._read_beats, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_beats(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            match = BEAT.match(line.strip())
            if match is None:
                continue
            beat = Beat(
                seen=time.monotonic(),
                at=dt.datetime.fromisoformat(match["at"].replace("Z", "+00:00")),
                requests=int(match["requests"]),
                errors=int(match["errors"]),
                duration=float(match["duration"]),
                line=line.strip(),
            )
            with self._lock:
                self.beats.append(beat)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line.rstrip())

    def since(self, index: int) -> list[Beat]:
        with self._lock:
            return self.beats[index:]

    def count(self) -> int:
        with self._lock:
            return len(self.beats)

    def errors_text(self) -> str:
        with self._lock:
            return "\n".join(self.stderr)

    def wait_beats(
        self, ok: Callable[[list[Beat]], bool], *, after: int = 0, what: str, timeout: float
    ) -> list[Beat]:
        """The heartbeats after index `after` once `ok` holds for them; fail after timeout."""

        def probe() -> list[Beat] | None:
            assert self.proc.poll() is None, f"collect exited:\n{self.errors_text()[-3000:]}"
            beats = self.since(after)
            return beats if ok(beats) else None

        return wait_for(probe, what=what, timeout=timeout, every=0.05)

    def scrape(self) -> dict[str, float]:
        """The unlabelled samples of /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        # the first scrape builds the families itself: well over 10 s on a busy machine
        text = requests.get(url, timeout=90).text
        return {
            s.name: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if not s.labels
        }

    def stop(self) -> int | None:
        """SIGTERM, as `docker stop` does; the exit code (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # its thread stacks go to stderr
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            code = None
        for reader in self._readers:
            reader.join(5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code


def overview(
    store: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    interval: float = INTERVAL,
    snapshot: str | None = None,
) -> AppTest:
    """The dashboard's Overview page, as the app serves it, on `store`, expecting a poll
    every `interval` seconds; showing `snapshot` (its `?at=` address) when given."""
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", f"{interval:g}s")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "")
    at = AppTest.from_file(str(APP), default_timeout=60)
    if snapshot is not None:
        at.query_params["at"] = snapshot
    at.run()
    at.switch_page("app_pages/overview.py").run()
    assert not at.exception, at.exception
    return at


def unread_requests(port: int) -> int:
    """Connections to `port` holding bytes its listener has not read yet: /proc/net/tcp rows
    whose local port is `port`, state 01 (established) and receive queue above 0."""
    found = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                _, local, _, state, queues = row.split()[:5]
                unread = int(queues.split(":")[1], 16)
                found += int(local.rsplit(":", 1)[1], 16) == port and state == "01" and unread > 0
    return found


def newest_at(store: Path) -> dt.datetime:
    index = Store(store).snapshots()
    newest: dt.datetime = pd.Timestamp(index["collected_at"].iloc[-1]).to_pydatetime()
    return newest


def write_figures(name: str, figures: dict[str, Any]) -> None:
    _figures[name] = figures
    try:
        known = json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        known = {}
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps({**known, **_figures}, indent=2) + "\n")


@pytest.fixture
def broker() -> Iterator[LocalPulsar]:
    """A standalone of this test alone: it is killed (never the shared `pulsar`)."""
    own = LocalPulsar().start()
    try:
        yield own
    finally:
        own.kill()  # its data is thrown away: no graceful shutdown to wait for
        own.stop()


class Restart(threading.Thread):
    """`broker.restart()` on a thread; `back_at` is when it answered again."""

    def __init__(self, broker: LocalPulsar) -> None:
        super().__init__(name="broker-restart", daemon=True)
        self.broker = broker
        self.started_at = time.monotonic()
        self.back_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.broker.restart()
            self.back_at = time.monotonic()
        except BaseException as exc:  # reported by the test
            self.error = exc


def retry_in(beat: Beat) -> float:
    return float(beat.line.split("retry_in=")[1].split()[0].rstrip("s"))


def test_collect_survives_a_broker_killed_mid_poll_and_recovers_without_a_restart(
    broker: LocalPulsar, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = f"persistent://public/default/kept-{uuid.uuid4().hex[:8]}"  # outlives the crash
    cluster_api(broker.admin_url, "PUT", "/admin/v2/" + kept.replace("://", "/", 1))
    ports = (broker.web_port, broker.broker_port, broker.bookie_port)
    store = tmp_path / "store"
    lens = Collector(broker.admin_url, store)
    try:
        lens.wait_beats(lambda b: sum(x.good for x in b) >= 2, what="two good polls", timeout=60)
        before = lens.scrape()
        assert before["pulsar_lens_failed_polls_total"] == 0

        # Freeze the JVM right after a poll, so that the next poll is surely in flight (its
        # calls unanswered), then SIGKILL it: the poll's connections are reset under it.
        lens.wait_beats(lambda b: len(b) >= 1, after=lens.count(), what="a poll", timeout=30)
        beats_then = lens.count()
        assert broker.pid is not None
        os.killpg(broker.pid, signal.SIGSTOP)
        wait_for(  # the kernel takes the request; the frozen JVM never reads it
            lambda: unread_requests(broker.web_port),
            what=f"a poll's request waiting unread on the frozen broker's port {broker.web_port}",
            timeout=60,
        )
        unread_at = time.monotonic()  # a poll is under way: the broker holds its request
        assert lens.count() == beats_then, "a poll finished against the frozen broker"
        killed_at = time.monotonic()
        broker.kill()

        # The poll under way when the JVM died, then a retry: each fails and says so.
        failed = lens.wait_beats(
            lambda b: len(b) >= 2, after=beats_then, what="two failed polls", timeout=30
        )
        down_beats, last_stored = beats_then + len(failed), newest_at(store)
        # The broker starts again now, while the outage is checked: it takes several seconds
        # to answer again, and nothing can be stored before it does.
        restart = Restart(broker)
        restart.start()
        in_flight = failed[0]
        # the first beat since is the poll that was under way at `unread_at` and ended after the
        # JVM died (`seen`, when its line was read, trails its end on a busy machine: the time
        # the poll began is unread_at at the latest, not seen - duration)
        assert in_flight.duration > killed_at - unread_at and killed_at < in_flight.seen, in_flight
        for beat in failed:
            assert beat.unreachable and beat.errors > 0 and "retry_in=" in beat.line, beat
        waits = [retry_in(b) for b in failed]
        assert waits == sorted(waits), "the wait between failed polls does not grow"
        log = lens.errors_text()
        assert "could not reach the admin API" in log
        assert f"port={broker.web_port}" in log  # the broker's address is in the errors

        # /metrics counts the failures (the beat's line is printed before the counter moves,
        # so a scrape right after the line may not hold it yet); the snapshot age grows.
        down_1 = wait_for(
            lambda: (s := lens.scrape())["pulsar_lens_failed_polls_total"] >= len(failed) and s,
            what=f"/metrics counting the {len(failed)} failed polls",
            timeout=30,
            seen=lens.scrape,
        )
        assert down_1["pulsar_lens_failed_polls_total"] >= len(failed)
        assert down_1["pulsar_lens_poll_endpoint_errors"] > 0
        age_1 = down_1["pulsar_lens_snapshot_age_seconds"]
        assert age_1 > before["pulsar_lens_snapshot_age_seconds"]
        # with nothing stored, the snapshot's age keeps growing: a later scrape shows it older
        age_2 = wait_for(
            lambda: (a := lens.scrape()["pulsar_lens_snapshot_age_seconds"]) >= age_1 + 0.9 and a,
            what="the snapshot age to grow by 0.9s while the broker is down",
            timeout=30,
            seen=lens.scrape,
        )

        # The Overview on the collector's store: stale, with the snapshot's age.
        age_before = (dt.datetime.now(dt.UTC) - last_stored).total_seconds()
        page = overview(store, monkeypatch)
        age_after = (dt.datetime.now(dt.UTC) - last_stored).total_seconds()
        rendered_at = time.monotonic()
        assert newest_at(store) == last_stored, "a poll was stored while the page was drawn"
        stale = [e.value for e in page.error if "Polls have stopped" in e.value]
        assert stale, [e.value for e in page.error]
        shown_age = re.search(r"newest snapshot is (\d+)s old", stale[0])
        assert shown_age is not None, stale[0]
        assert int(age_before) <= int(shown_age[1]) <= age_after  # its age when drawn
        assert any(f"{last_stored:%Y-%m-%d %H:%M:%S}" in c.value for c in page.caption)

        # Same broker, same ports, same data: the same collector polls it again by itself.
        restart.join(180)
        assert restart.error is None, restart.error
        assert restart.back_at is not None
        recovered = lens.wait_beats(
            lambda b: any(x.good for x in b), after=down_beats, what="a good poll", timeout=90
        )
        first_good = next(b for b in recovered if b.good)
        after_kill = lens.since(beats_then)
        outage = after_kill[: after_kill.index(first_good)]
        polls_failed = sum(b.unreachable for b in outage)
        assert lens.proc.poll() is None  # the same collector process all along
        assert (broker.web_port, broker.broker_port, broker.bookie_port) == ports
        assert newest_at(store) > last_stored  # a new snapshot is stored, of the same data
        topics = Store(store).read_latest("topics").to_pandas()
        assert kept in set(topics["topic"])
        up = lens.scrape()
        assert up["pulsar_lens_failed_polls_total"] == polls_failed
        assert up["pulsar_lens_poll_endpoint_errors"] == 0
        assert up["pulsar_lens_snapshot_age_seconds"] < age_2
        time.sleep(max(0.0, rendered_at + 2.5 - time.monotonic()))  # the page's index cache
        following = lens.wait_beats(
            lambda b: len(b) >= 1, after=lens.count(), what="the next poll", timeout=30
        )
        assert following[-1].good and "retry_in=" not in following[-1].line  # failures reset
        # the page draws a snapshot of the recovered polls and no longer calls them stopped;
        # it expects one every PAGE_INTERVAL, so a poll or draw slowed by a busy machine
        # (several seconds at load 10) is not taken for polls that stopped
        page = overview(store, monkeypatch, interval=PAGE_INTERVAL)
        assert not [e.value for e in page.error if "Polls have stopped" in e.value]
        drawn = [m for c in page.caption if (m := SNAPSHOT_SHOWN.search(c.value))]
        assert drawn and drawn[0][1] > f"{last_stored:%Y-%m-%d %H:%M:%S}", page.caption

        write_figures(
            "single_broker",
            {
                "interval_s": INTERVAL,
                "polls_failed": polls_failed,
                "polls_partial": sum(not b.unreachable for b in outage),
                "retry_waits_s": [retry_in(b) for b in after_kill if "retry_in=" in b.line],
                "in_flight_poll_duration_s": in_flight.duration,
                "restart_s": round(restart.back_at - restart.started_at, 2),
                "down_s": round(restart.back_at - killed_at, 2),
                "broker_back_to_first_good_poll_s": round(
                    max(0.0, first_good.seen - restart.back_at), 2
                ),
            },
        )
    finally:
        code = lens.stop()
    assert code == 0, f"collect ended with {code}:\n{lens.errors_text()[-3000:]}"


def shown(owner: object) -> str:
    """A broker id, or "-" for none (None or NaN in a frame)."""
    return owner if isinstance(owner, str) else "-"


def cluster_api(url: str, method: str, path: str, **kwargs: Any) -> Any:
    resp = requests.request(method, f"{url}{path}", timeout=30, **kwargs)
    assert resp.status_code < 300, f"{method} {path}: {resp.status_code} {resp.text[:300]}"
    return resp.json() if resp.text.strip() else None


def lookup_owner(url: str, topic: str) -> str:
    answer = cluster_api(url, "GET", "/lookup/v2/topic/" + topic.replace("://", "/", 1))
    return str(answer["httpUrl"]).split("://", 1)[1].rstrip("/")


class Load:
    """A producer per topic, each sending a small message every 50 ms until closed."""

    def __init__(self, service_url: str, topics: list[str]) -> None:
        self.client = logs.pulsar_client(service_url, operation_timeout_seconds=30)
        self.producers = [
            self.client.create_producer(t, batching_enabled=False, send_timeout_millis=0)
            for t in topics
        ]
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for producer in self.producers:
                producer.send_async(b"load", None)
                self.sent += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()


def owners_in(store: Path, sid: str, namespace: str) -> dict[str, str | None]:
    bundles = Store(store).read("bundles", snapshot_ids=[sid]).to_pandas()
    mine = bundles[bundles["namespace"] == namespace]
    return {
        str(b): (None if pd.isna(o) else str(o))
        for b, o in zip(mine["bundle"], mine["owner_broker"], strict=True)
    }


def test_one_broker_of_two_killed_gives_partial_polls_naming_it_and_its_bundles_move(
    broker_pool: BrokerPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = broker_pool.cluster("modular")  # shared: the victim is started again at the end
    # The victim is the broker that is not the leader, whichever that is (the first test to use
    # the cluster may find either elected): a dead leader also leaves the cluster without one,
    # and so its bundles unassigned, until its session expires; that is another test's subject.
    leader = parse_leader(cluster_api(cluster.admin_url, "GET", "/admin/v2/brokers/leaderBroker"))
    gone = next(i for i, b in enumerate(cluster.broker_processes) if b.broker_id != leader)
    victim, survivor = cluster.broker_processes[gone], cluster.broker_processes[1 - gone]
    url = survivor.admin_url  # the collector's admin URL is the broker that stays
    namespace = f"public/lens-kill-{uuid.uuid4().hex[:8]}"
    cluster_api(url, "PUT", f"/admin/v2/namespaces/{namespace}")
    boundaries = parse_boundaries(
        cluster_api(url, "GET", f"/admin/v2/namespaces/{namespace}/bundles")
    )
    topics: dict[str, str] = {}  # bundle -> a topic in it
    for i in range(400):
        topic = f"persistent://{namespace}/load-{i}"
        topics.setdefault(bundle_for(topic, boundaries), topic)
    assert len(topics) == len(boundaries) - 1
    store = tmp_path / "store"
    lens = Collector(url, store, "--namespace", namespace)  # starts while the load does
    load: Load | None = None
    killed = False
    try:
        load = Load(cluster.service_url, sorted(topics.values()))
        # Spread the bundles: each broker owns at least one (moved there by an unload).
        owners = {b: lookup_owner(url, t) for b, t in topics.items()}
        for broker in (victim, survivor):
            if broker.broker_id not in owners.values():
                bundle = sorted(owners)[0 if broker is victim else -1]
                cluster_api(
                    url,
                    "PUT",
                    f"/admin/v2/namespaces/{namespace}/{bundle}/unload",
                    params={"destinationBroker": broker.broker_id},
                )
                owners[bundle] = wait_for(
                    lambda b=bundle, to=broker.broker_id: (  # type: ignore[misc]
                        to if lookup_owner(url, topics[b]) == to else None
                    ),
                    what=f"{bundle} to move to {broker.broker_id}",
                    timeout=30,
                )

        def spread(beats: list[Beat]) -> bool:
            sid = Store(store).latest_snapshot_id() if any(b.good for b in beats) else None
            return sid is not None and owners_in(store, sid, namespace) == owners

        lens.wait_beats(spread, what="a poll seeing the bundles spread", timeout=60)
        moving = sorted(b for b, o in owners.items() if o == victim.broker_id)

        killed_beats = lens.count()
        killed_wall, killed_at = dt.datetime.now(dt.UTC), time.monotonic()
        cluster.kill_broker(gone)
        killed = True

        # Partial polls: the dead broker's own calls fail and name it.
        lens.wait_beats(
            lambda b: any(x.errors and not x.unreachable for x in b),
            after=killed_beats,
            what="a partial poll",
            timeout=30,
        )
        scraped = lens.scrape()  # its session lasts seconds more: this poll is partial too
        assert scraped["pulsar_lens_poll_endpoint_errors"] > 0
        assert scraped["pulsar_lens_failed_polls_total"] == 0  # partial, not failed
        # The Overview of that poll names the broker that failed. Drawn at its address: the
        # polls after it turn whole once the dead broker's session expires, which on a busy
        # machine can come before a page drawn "at the newest" has read the store. The newest
        # partial poll stored (its beat came after it), not one started after the kill: a
        # poll under way when the broker died is partial too, and may be the only one yet.
        index = Store(store).snapshots()
        partials = index[index["partial"].astype(bool)]["snapshot_id"]
        assert not partials.empty, index[["collected_at", "partial"]]
        partial_sid = str(partials.iloc[-1])
        page = overview(store, monkeypatch, snapshot=partial_sid)
        warnings = [w.value for w in page.warning]
        assert any("This snapshot is partial" in w for w in warnings), warnings
        (naming,) = [w for w in warnings if "broker(s) failed" in w]
        assert "to 1 broker(s) failed" in naming  # counted here, named in the table below
        (calls,) = [d.value for d in page.dataframe if "missing" in d.value.columns]
        assert set(calls["broker"]) == {victim.broker_id}, calls.to_string()

        # The bundles it owned move to the survivor (its session expires; the producers
        # look their topics up again).
        def moved(beats: list[Beat]) -> bool:
            sid = Store(store).latest_snapshot_id()
            found = owners_in(store, sid, namespace) if sid else {}
            return all(found.get(b) == survivor.broker_id for b in moving)

        lens.wait_beats(moved, after=killed_beats, what="the bundles to move", timeout=90)
        moved_at = time.monotonic()
        index = Store(store).snapshots()
        index = index[pd.to_datetime(index["collected_at"], utc=True) > killed_wall]
        partial = index[index["partial"].astype(bool)]
        complete = index[~index["partial"].astype(bool)]
        assert len(partial) >= 1 and len(complete) >= 1, index[["collected_at", "partial"]]
        for errors_json in partial["errors_json"]:
            named = {e["endpoint"] for e in json.loads(errors_json)}
            assert all(victim.broker_id in e for e in named), named
            assert not any(survivor.broker_id in e for e in named), named
        endpoints = " ".join(e["endpoint"] for e in json.loads(partial["errors_json"].iloc[0]))
        assert "/broker-stats/topics" in endpoints and "/ownedNamespaces" in endpoints
        assert victim.broker_id in lens.errors_text()  # the collector's log names it too
        last = complete["snapshot_id"].iloc[-1]
        brokers = Store(store).read("brokers", snapshot_ids=[last]).to_pandas()
        assert list(brokers["broker_id"]) == [survivor.broker_id]  # it left the list

        events = Store(store).read("events").to_pandas()
        changes = events[
            (events["kind"] == "bundle_owner_changed") & (events["namespace"] == namespace)
        ]
        at = pd.to_datetime(changes["at"], utc=True)
        to_survivor = changes[(changes["after"] == survivor.broker_id) & (at > killed_wall)]
        assert sorted(s.rsplit("/", 1)[1] for s in to_survivor["subject"]) == moving
        # told from the last known owner across the partial polls, not from the gap: each
        # moving bundle's first change after the kill leaves the dead broker (to the survivor,
        # or to no owner when a complete poll saw it free before the survivor took it)
        after_kill = changes[at > killed_wall].sort_values("at")
        first = after_kill.groupby("subject").head(1)
        assert set(first["before"]) == {victim.broker_id}, after_kill.to_string()

        output = runner.run(BundleOwnership(), Store(store), {"namespace": namespace})
        assert set(output.result.frames["bundles"]["owner_broker"]) == {survivor.broker_id}
        plugin_events = output.result.frames["events"]
        plugin_events = plugin_events[pd.to_datetime(plugin_events["at"], utc=True) > killed_wall]
        for bundle in moving:  # each is shown passing from the dead broker to the survivor
            taken = [
                (kind, before, detail)
                for kind, before, after, detail in plugin_events[plugin_events["bundle"] == bundle][
                    ["kind", "before", "after", "detail"]
                ].values
                if after == survivor.broker_id and kind in ("moved", "acquired")
            ]
            assert len(taken) == 1, plugin_events.to_string()
            _kind, before, detail = taken[0]
            assert before == victim.broker_id or f"last owner {victim.broker_id}" in detail

        unloaded = plugin_events[plugin_events["kind"] == "unloaded"]
        # a broker that stops answering has unloaded nothing: no bundle is called unloaded
        # while the dead broker's calls fail (the partial polls), only once a complete poll
        # lists it free
        first_complete = pd.to_datetime(complete["collected_at"], utc=True).min()
        assert (pd.to_datetime(unloaded["at"], utc=True) >= first_complete).all(), unloaded

        def since_kill(at: Any) -> float:
            seconds = (pd.Timestamp(at).to_pydatetime() - killed_wall).total_seconds()
            return round(float(seconds), 2)

        timeout_ms = int(CLUSTER_SETTINGS["metadataStoreSessionTimeoutMillis"])
        write_figures(
            "one_broker_of_two",
            {
                "load_manager": "modular",
                "session_timeout_s": timeout_ms / 1000,
                "bundles": len(owners),
                "bundles_moved": len(moving),
                "partial_polls": len(partial),
                "broker_gone_from_list_after_s": since_kill(complete["collected_at"].iloc[0]),
                "ownership_moved_after_s": round(moved_at - killed_at, 2),
                "stored_events_after_kill": sorted(
                    f"{shown(b)} -> {shown(a)}"
                    for b, a in changes[at > killed_wall][["before", "after"]].values
                ),
                "first_partial_poll_after_s": since_kill(partial["collected_at"].iloc[0]),
                "plugin_unloaded_after_s": sorted({since_kill(at) for at in unloaded["at"]}),
                "plugin_events_after_kill": sorted(
                    f"{k}: {shown(b)} -> {shown(a)}"
                    for k, b, a in plugin_events[["kind", "before", "after"]].values
                ),
                "messages_sent": load.sent,
            },
        )
    finally:
        code = lens.stop()
        if load is not None:
            load.close()
        if killed:  # started again while the next tests run; the pool waits for it
            broker_pool.revive(cluster, gone)
        with contextlib.suppress(requests.RequestException):
            requests.delete(
                f"{url}/admin/v2/namespaces/{namespace}", params={"force": "true"}, timeout=30
            )
    assert code == 0, f"collect ended with {code}:\n{lens.errors_text()[-3000:]}"
