"""Key sampling rounds beside the polling loop: which topics, how often, and where rows go.

After every `every`-th stored poll, the key sampler (collectors.keys) reads the recent keys of
a bounded number of topics of that poll and writes them to the store's `key_samples` table
with the poll's snapshot id and `collected_at`, so analyses read them with that snapshot.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pulsar_lens.collectors.heartbeat import Heartbeat, HeartbeatFn
from pulsar_lens.collectors.keys import (
    DEFAULT_PER_TOPIC,
    DEFAULT_TIMEOUT,
    DEFAULT_WINDOW,
    TopicSample,
    collect_key_samples,
)
from pulsar_lens.collectors.loop import PollFn
from pulsar_lens.core.config import ClusterSettings
from pulsar_lens.core.model import Snapshot, records_to_table
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.store import Store
from pulsar_lens.core.tablerows import columns_of
from pulsar_lens.core.values import DEFAULT_MAX_TOPICS as DEFAULT_MAX_TOPICS

log = logging.getLogger(__name__)

SCHEMES = ("persistent://", "non-persistent://")


class CollectFn(Protocol):
    def __call__(
        self,
        service_url: str,
        topics: Iterable[str],
        *,
        per_topic: int,
        window: dt.timedelta,
        timeout: float,
        token: Secret | None,
        connection: ClusterSettings | None,
    ) -> list[TopicSample]: ...


def choose_topics(
    snapshot: Snapshot, *, pattern: str | None = None, limit: int, offset: int = 0
) -> list[str]:
    """Up to `limit` topics of the snapshot to sample, starting at `offset` in name order
    (wrapping), so successive rounds with growing offsets visit every candidate.

    Candidates: without `pattern`, the topics with a Key_Shared subscription; with it, the
    topics whose full name (or name without scheme, or partitioned parent) matches the
    shell-style pattern, e.g. `persistent://public/demo/*` or `public/demo/orders*`.
    """
    if pattern is None:
        topics, kinds = columns_of(snapshot.subscriptions, ("topic", "type"))
        names = {t for t, kind in zip(topics, kinds, strict=True) if kind == "Key_Shared"}
    else:
        topics, parents = columns_of(snapshot.topics, ("topic", "partitioned_topic"))
        names = {
            t
            for t, parent in zip(topics, parents, strict=True)
            if _matches(pattern, t) or (parent and _matches(pattern, parent))
        }
    ordered = sorted(names)
    if not ordered or limit < 1:
        return []
    start = offset % len(ordered)
    return (ordered[start:] + ordered[:start])[:limit]


def _matches(pattern: str, topic: str) -> bool:
    bare = topic
    for scheme in SCHEMES:
        bare = bare.removeprefix(scheme)
    return fnmatch.fnmatchcase(topic, pattern) or fnmatch.fnmatchcase(bare, pattern)


def service_url_of(snapshot: Snapshot) -> str | None:
    """A broker's binary protocol URL as the snapshot's broker list reports it."""
    return next((b.pulsar_service_url for b in snapshot.brokers if b.pulsar_service_url), None)


@dataclass
class KeySampling:
    """Samples keys after every `every`-th stored poll; see the module docstring.

    Wire it into a PollLoop with `wrap(poll)` (remembers each polled snapshot) and
    `after(on_heartbeat)` (samples once the heartbeat says the snapshot was stored). Without
    a `service_url`, the first broker's `pulsar_service_url` from the snapshot is used.
    Sampling never stops the loop: failures are logged.
    """

    store: Store
    service_url: str | None = None
    every: int = 1
    pattern: str | None = None
    max_topics: int = DEFAULT_MAX_TOPICS
    per_topic: int = DEFAULT_PER_TOPIC
    window: dt.timedelta = DEFAULT_WINDOW
    timeout: float = DEFAULT_TIMEOUT
    token: Secret | None = field(default=None, repr=False)
    # the OAuth2 and TLS settings of the cluster sampled (None: `token` alone)
    connection: ClusterSettings | None = field(default=None, repr=False)
    collect: CollectFn = collect_key_samples
    rounds: int = field(default=0, init=False)
    _latest: Snapshot | None = field(default=None, init=False, repr=False)
    _stored: int = field(default=0, init=False)
    _offset: int = field(default=0, init=False)

    def wrap(self, poll: PollFn) -> PollFn:
        def remembering() -> Snapshot:
            snapshot = poll()
            self._latest = snapshot
            return snapshot

        return remembering

    def after(self, first: HeartbeatFn) -> HeartbeatFn:
        def both(beat: Heartbeat) -> None:
            first(beat)
            self.on_heartbeat(beat)

        return both

    def on_heartbeat(self, beat: Heartbeat) -> None:
        snapshot, self._latest = self._latest, None
        if beat.snapshot_id is None or snapshot is None:
            return
        self._stored += 1
        if (self._stored - 1) % max(1, self.every):
            return
        try:
            self.sample(snapshot, beat.snapshot_id)
        except Exception:  # sampling is a bonus; the poll is stored and the loop goes on
            log.exception("key sampling failed; polling goes on")

    def sample(self, snapshot: Snapshot, snapshot_id: str) -> list[TopicSample]:
        """One round: sample the chosen topics and store their rows under `snapshot_id`."""
        topics = choose_topics(
            snapshot, pattern=self.pattern, limit=self.max_topics, offset=self._offset
        )
        self._offset += len(topics)
        url = self.service_url or service_url_of(snapshot)
        if not topics or url is None:
            log.info("key sampling: %s", "no topic to sample" if url else "no service URL")
            return []
        samples = self.collect(
            url,
            topics,
            per_topic=self.per_topic,
            window=self.window,
            timeout=self.timeout,
            token=self.token,
            connection=self.connection,
        )
        self.rounds += 1
        records = [r for s in samples for r in s.records]
        if records:
            table = records_to_table(
                "key_samples",
                records,
                snapshot_id=snapshot_id,
                collected_at=snapshot.collected_at,
                cluster=snapshot.cluster,
            )
            self.store.write_table("key_samples", table)
        log.info("%s", round_line(samples))
        return samples


def round_line(samples: Sequence[TopicSample]) -> str:
    """One line about a sampling round, for the log."""
    keys = sum(len(s.records) for s in samples)
    unresolved = sum(s.unresolved for s in samples)
    failed = [s.topic for s in samples if s.error]
    line = f"key samples: {keys} keys from {len(samples)} topics"
    if unresolved:
        line += f", {unresolved} messages without a visible sticky key"
    if failed:
        line += f", {len(failed)} failed (first: {failed[0]})"
    return line
