"""The sticky-range planner: N nodes' ranges from a Pulsar 4.0 consistent-hashing ring.

`sticky-ranges` shows the plan and scores it on uniform and sampled hashes; `key-distribution`
scores the same plan on the key history of the whole store (its what-if), so both plan alike.
"""

from __future__ import annotations

from pulsar_lens.api import ConsistentHashingSelector, Consumer, HashRange


def plan_ranges(nodes: int, points: int, *, prefix: str) -> list[tuple[HashRange, ...]]:
    """Sticky ranges per node from a 4.0 consistent-hashing ring, covering 0..65535."""
    selector = ConsistentHashingSelector(points=points)
    handles = [Consumer(f"{prefix}-{i}") for i in range(nodes)]
    for handle in handles:
        selector.add(handle)
    by_node = selector.assignments().by_consumer(handles)
    plan = [list(by_node.get(h, ())) for h in handles]
    for ranges in plan:  # the ring starts at hash 1; sticky slots start at 0
        if ranges and ranges[0][0] == 1:
            ranges[0] = (0, ranges[0][1])
    return [tuple(r) for r in plan]
