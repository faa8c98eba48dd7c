"""Our own analyses. They load through the same path as third-party plugins.

Each entry is "module:Class"; `plugins.registry.discover()` imports and validates them one by
one, so a broken built-in is reported like any other plugin and the rest still load.
"""

from __future__ import annotations

BUILTIN_PLUGINS: tuple[str, ...] = (
    "plugins.builtin.bundle_ownership:BundleOwnership",
    "plugins.builtin.unload_latency:UnloadLatency",
    "plugins.builtin.subscription_status:SubscriptionStatus",
    "plugins.builtin.stuck_hashes:StuckHashes",
    "plugins.builtin.key_shared_map:KeySharedMap",
    "plugins.builtin.sticky_ranges:StickyRanges",
    "plugins.builtin.failover_assignment:FailoverAssignment",
    "plugins.builtin.stuck_hash_history:StuckHashHistory",
    "plugins.builtin.key_distribution:KeyDistribution",
    "plugins.builtin.bundle_load_history:BundleLoadHistory",
    "plugins.builtin.failover_history:FailoverHistory",
    "plugins.builtin.unload_history:UnloadHistory",
)
