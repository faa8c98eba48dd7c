"""The record-by-record totals `collectors.partmerge` computed before it counted by column:
kept to compare with (tests/collectors/test_partmerge_totals.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

import pyarrow as pa

from pulsar_lens.core.model import BrokerRecord, BundleRecord
from pulsar_lens.core.tablerows import table_columns


def reference_topic_totals(
    bundles: Mapping[str, Mapping[str, BundleRecord]], topics: pa.Table
) -> list[BundleRecord]:
    """Each bundle with its topic count and, when any of its topics has rates, their sums."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    rate_in: dict[tuple[str, str], float] = defaultdict(float)
    rate_out: dict[tuple[str, str], float] = defaultdict(float)
    seen_rates: set[tuple[str, str]] = set()
    columns = ("namespace", "bundle", "msg_rate_in", "msg_rate_out")
    for ns, bundle, into, out in zip(*table_columns(topics, columns), strict=True):
        if bundle is None:
            continue
        key = (ns, bundle)
        counts[key] += 1
        if into is not None:
            seen_rates.add(key)
            rate_in[key] += into
            rate_out[key] += out or 0.0
    found = []
    for ns in sorted(bundles):
        for rec in bundles[ns].values():
            key = (ns, rec.bundle)
            loaded = key in seen_rates
            found.append(
                replace(
                    rec,
                    topic_count=counts.get(key, 0),
                    msg_rate_in=rate_in[key] if loaded else None,
                    msg_rate_out=rate_out[key] if loaded else None,
                )
            )
    return found


def reference_broker_totals(
    brokers: list[BrokerRecord], topics: pa.Table, consumers: pa.Table
) -> list[BrokerRecord]:
    """Fill the counts and rates a load report would give from the topics each broker serves,
    where the load manager keeps no report (NoopLoadManager answers 204); a report wins."""
    if all(
        None not in (b.num_topics, b.msg_rate_in, b.msg_rate_out, b.num_consumers) for b in brokers
    ):
        return brokers  # every figure reported: nothing to count
    names, owners, ins, outs = table_columns(
        topics, ("topic", "owner_broker", "msg_rate_in", "msg_rate_out")
    )
    owner_of = dict(zip(names, owners, strict=True))
    n_topics: dict[str | None, int] = defaultdict(int)
    rate_in: dict[str | None, float] = defaultdict(float)
    rate_out: dict[str | None, float] = defaultdict(float)
    n_consumers: dict[str | None, int] = defaultdict(int)
    for owner, into, out in zip(owners, ins, outs, strict=True):
        n_topics[owner] += 1
        rate_in[owner] += into or 0.0
        rate_out[owner] += out or 0.0
    for topic in consumers.column("topic").to_pylist():
        n_consumers[owner_of.get(topic)] += 1
    return [
        replace(
            b,
            num_topics=b.num_topics if b.num_topics is not None else n_topics[b.broker_id],
            msg_rate_in=b.msg_rate_in if b.msg_rate_in is not None else rate_in[b.broker_id],
            msg_rate_out=b.msg_rate_out if b.msg_rate_out is not None else rate_out[b.broker_id],
            num_consumers=(
                b.num_consumers if b.num_consumers is not None else n_consumers[b.broker_id]
            ),
        )
        for b in brokers
    ]
