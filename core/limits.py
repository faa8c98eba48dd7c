"""The largest sizes a user can ask the models for, in one place: the CLI, the dashboard forms
and the plugins' parameters all read them, so they never disagree.

Each is what a broker accepts or a documented limit of ours, chosen so that the largest
request still answers in seconds and in bounded memory.
"""

from __future__ import annotations

from pulsar_lens.core.pulsarvalues import RANGE_SIZE

MAX_REPLICA_POINTS = 1024
"""`subscriptionKeySharedConsistentHashingReplicaPoints` the model goes up to. The broker's
default is 100 and its setting has no upper bound, but each point costs a ring entry per
consumer on the broker too; past 1024 the ring fit of key-shared-map stops searching."""

MAX_CONSUMERS = 20_000
"""Consumers of one Key_Shared or Failover subscription in a model. The broker has no cap;
20,000 with 1024 points is a ring of 20 M points, the most one model builds."""

MAX_PARTITIONS = 65_536
"""Partitions of a topic in a failover model. `maxNumPartitionsPerPartitionedTopic` is 0
(unlimited) by default; a partitioned topic with more than this is not one anyone runs."""

MAX_BUNDLES = 65_536
"""Bundles of a namespace in a model. The admin API accepts up to 2^32, but
`loadBalancerNamespaceMaximumBundles` (default 128) caps what splits reach; 65,536 bundles
are 65,536 boundaries, listed in well under a second."""

MAX_HASH = RANGE_SIZE - 1
"""The largest sticky-key slot a sticky (exclusive) range may name: 0..65535."""
