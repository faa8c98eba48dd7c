"""A `make_snapshot()` factory for tests of the store, the loop and the CLI."""

from __future__ import annotations

import datetime as dt

from pulsar_lens.core.model import (
    BrokerRecord,
    BundleRecord,
    ConsumerRecord,
    EndpointError,
    Snapshot,
    SubscriptionRecord,
    TopicRecord,
)

T0 = dt.datetime(2026, 11, 21, 12, 0, 0, tzinfo=dt.UTC)


def make_snapshot(
    *,
    at: dt.datetime = T0,
    cluster: str = "standalone",
    topics: int = 3,
    errors: tuple[EndpointError, ...] = (),
    requests: int = 9,
    backlog: int = 0,
) -> Snapshot:
    """A small, valid snapshot: one broker, one bundle, `topics` topics with a consumer each."""
    names = [f"persistent://public/default/t{i}" for i in range(topics)]
    return Snapshot(
        cluster=cluster,
        collected_at=at,
        brokers=(BrokerRecord(broker_id="127.0.0.1:8080", version="4.0.7"),),
        bundles=(
            BundleRecord(
                namespace="public/default",
                tenant="public",
                bundle="0x00000000_0xffffffff",
                lower=0,
                upper=0xFFFFFFFF,
                owner_broker="127.0.0.1:8080",
                topic_count=topics,
            ),
        ),
        topics=tuple(
            TopicRecord(topic=n, tenant="public", namespace="public/default", backlog_size=backlog)
            for n in names
        ),
        subscriptions=tuple(
            SubscriptionRecord(topic=n, subscription="sub", type="Key_Shared", consumer_count=1)
            for n in names
        ),
        consumers=tuple(
            ConsumerRecord(
                topic=n, subscription="sub", consumer_name="c0", hash_ranges=((0, 65535),)
            )
            for n in names
        ),
        errors=errors,
        durations={"topics": 0.25},
        requests=requests,
    )


def unreachable_snapshot(*, at: dt.datetime = T0, cluster: str = "standalone") -> Snapshot:
    """What a poll returns when every endpoint failed: errors and no rows."""
    error = EndpointError(
        endpoint="GET /admin/v2/clusters", status=None, message="connection refused"
    )
    return Snapshot(cluster=cluster, collected_at=at, errors=(error,), requests=1)
