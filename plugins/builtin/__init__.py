"""Our own analyses. They load through the same path as third-party plugins.

Each entry is "module:Class"; `plugins.registry.discover()` imports and validates them one by
one, so a broken built-in is reported like any other plugin and the rest still load.
"""

from __future__ import annotations

BUILTIN_PLUGINS: tuple[str, ...] = (
    "pulsar_lens.plugins.builtin.bundle_ownership:BundleOwnership",
    "pulsar_lens.plugins.builtin.unload_latency:UnloadLatency",
    "pulsar_lens.plugins.builtin.subscription_status:SubscriptionStatus",
    "pulsar_lens.plugins.builtin.cluster_overview:ClusterOverview",
    "pulsar_lens.plugins.builtin.stuck_hashes:StuckHashes",
    "pulsar_lens.plugins.builtin.key_shared_map:KeySharedMap",
    "pulsar_lens.plugins.builtin.sticky_ranges:StickyRanges",
    "pulsar_lens.plugins.builtin.failover_assignment:FailoverAssignment",
    "pulsar_lens.plugins.builtin.stuck_hash_history:StuckHashHistory",
    "pulsar_lens.plugins.builtin.key_distribution:KeyDistribution",
    "pulsar_lens.plugins.builtin.bundle_load_history:BundleLoadHistory",
    "pulsar_lens.plugins.builtin.failover_history:FailoverHistory",
    "pulsar_lens.plugins.builtin.unload_history:UnloadHistory",
    "pulsar_lens.plugins.builtin.incident_timeline:IncidentTimeline",
)
