"""Our model of a Key_Shared subscription, rebuilt from what the stats show, and its what-ifs.

Consistent hashing: the ring is rebuilt from the consumer names in connection order with
`core.selectors.ConsistentHashingSelector`. Two settings are not in the stats and are inferred
from the broker's own ranges:

* **replica points** (`subscriptionKeySharedConsistentHashingReplicaPoints`): every range end
  except 65535 is a ring point of the range's consumer, i.e. `h31(name\\0index\\0i) % 65535 + 1`
  for some `i < points`. The largest such `i` over all range ends, plus one, is a lower bound
  L. We try the default 100 (when >= L), then L, L+1, ... L+32 (a consumer's last points can
  sit inside its own merged ranges) and keep the first that reproduces every range exactly;
  if none does, the closest one is kept and the subscription is flagged as drifting.
  Points above 1024 are not searched.
* **name indexes** of consumers sharing a name (`ConsumerNameIndexTracker`: the lowest index
  no connected namesake holds, so a consumer that left and came back may hold index 0 while
  it connected last): each namesake gets the index whose ring points explain most of its
  range ends. The replay then occupies lower indexes with placeholder consumers that leave
  again at once, which leaves the ring exactly as if they had never joined.

Auto split ranges depend on the joins and leaves of the past, which a snapshot cannot show:
the rebuild from the connected consumers may differ after a leave (reported as drift with
that reason), and what-ifs start from the broker's own ranges instead. Sticky ranges are the
consumers' own, so the model is the observed state.

The auto split and sticky models take the broker line (`pulsar`, "4.0" or "3.0"): a 3.0
broker selects auto split ranges by `hash % 65536` and gives a sticky consumer the gap between
two of its own ranges. A 3.0 broker's consistent hashing (31-bit ranges, one per ring point) is
3.0.7's ring, inferred the same way by `core.keyshared.legacy`; its what-ifs count hashes over
the 31-bit space.

The 4.0 consistent-hashing search itself runs in `core.keyshared.fit`, for many subscriptions at
once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pulsar_lens.core.assignments import Assignments, Consumer, RangeMove, diff_assignments
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.keyshared.fit import (
    Fit,
    fit_consistent,
    name_indexes_of,
    point_candidates,
)
from pulsar_lens.core.keyshared.layout import from_members
from pulsar_lens.core.keyshared.legacy import fit_3_0, replay_3_0
from pulsar_lens.core.keyshared.points import PointTable
from pulsar_lens.core.keyshared.ranges import (
    ROUTABLE_HIGH,
    ROUTABLE_LOW,
    WIDE_HIGH,
    Kind,
    Member,
    owner_array,
    routable_count,
)
from pulsar_lens.core.selectors import (
    AutoSplitSelector,
    ConsistentHashingSelector,
    Selector,
    StickySelector,
)


@dataclass
class Model:
    """A selector holding one handle per member (same order), and how it was obtained."""

    kind: Kind
    selector: Selector | None
    handles: list[Consumer]
    points: int | None = None
    points_note: str = ""
    name_indexes: tuple[int, ...] = ()
    drift_hashes: int = 0
    drift_reason: str = ""
    pulsar: PulsarLine = "4.0"  # the broker line whose selector the model is

    @property
    def drift(self) -> bool:
        return self.drift_hashes > 0

    @property
    def space(self) -> tuple[int, int]:
        """The hashes the model's ranges are counted over: 0..2**31-1 for 3.0's consistent
        hashing, else the routable 1..65535."""
        if self.kind == "consistent" and self.pulsar == "3.0":
            return 0, WIDE_HIGH
        return ROUTABLE_LOW, ROUTABLE_HIGH


def name_indexes(members: Sequence[Member]) -> tuple[int, ...]:
    """Each member's `ConsumerNameIndexTracker` index, as its range ends tell it."""
    found = name_indexes_of(from_members(members), np.zeros(1, np.int64), PointTable())
    return tuple(found.tolist())


def replay_consistent(
    members: Sequence[Member],
    indexes: Sequence[int],
    points: int,
    handles: Sequence[Consumer] | None = None,
    charset: str = "utf-8",
) -> tuple[ConsistentHashingSelector, list[Consumer]]:
    """A ring with the members joined in order, each holding its given name index."""
    selector = ConsistentHashingSelector(points=points, name_encoding=charset)
    own = list(handles) if handles is not None else [Consumer(m.name) for m in members]
    used: dict[str, set[int]] = {}
    for member, index, handle in zip(members, indexes, own, strict=True):
        taken = used.setdefault(member.name, set())
        placeholders = []
        for low in range(index):
            if low not in taken:
                placeholder = Consumer(member.name)
                selector.add(placeholder)
                placeholders.append(placeholder)
        selector.add(handle)
        for placeholder in placeholders:
            selector.remove(placeholder)
        taken.add(index)
    return selector, own


def observed_owners(members: Sequence[Member]) -> np.ndarray:
    return owner_array([m.ranges for m in members])


def model_owners(selector: Selector, handles: Sequence[Consumer]) -> np.ndarray:
    ranges = selector.assignments().by_consumer(handles)
    return owner_array([ranges.get(h, ()) for h in handles])


def differing(members: Sequence[Member], selector: Selector, handles: Sequence[Consumer]) -> int:
    return int((observed_owners(members) != model_owners(selector, handles)).sum())


def consistent_model(members: Sequence[Member], fit: Fit, at: int) -> Model:
    """The model of the `at`-th subscription of `fit`, with its ring replayed."""
    indexes, points = fit.indexes[at], fit.points[at]
    selector, handles = replay_consistent(members, indexes, points, charset=fit.charset)
    note, drift, reason = fit.notes[at], fit.drift[at], fit.reasons[at]
    return Model("consistent", selector, handles, points, note, indexes, drift, reason)


def rebuild_consistent(members: Sequence[Member], *, points: int = 0) -> Model:
    """The consistent-hashing model; `points` 0 infers the replica points from the ranges."""
    if not members:
        chosen, note = point_candidates(0, 0) if not points else ([points], "given")
        selector = ConsistentHashingSelector(points=chosen[0])
        return Model("consistent", selector, [], chosen[0], note)
    fit = fit_consistent(from_members(members), np.zeros(1, np.int64), points=points)
    return consistent_model(members, fit, 0)


def rebuild_consistent_3_0(
    members: Sequence[Member], *, points: int = 0, charset: str = "utf-8"
) -> Model:
    """3.0.7's consistent-hashing model; `points` 0 infers the replica points from the ranges."""
    fit = fit_3_0(members, points=points, charset=charset)
    return Model(
        "consistent",
        fit.selector,
        fit.handles,
        fit.points,
        fit.note,
        fit.indexes,
        fit.drift,
        fit.reason,
        pulsar="3.0",
    )


def rebuild_auto_split(members: Sequence[Member], *, pulsar: PulsarLine = "4.0") -> Model:
    """Auto split rebuilt from the connected consumers joining in order."""
    selector = AutoSplitSelector(pulsar=pulsar)
    handles = [Consumer(m.name) for m in members]
    try:
        for handle in handles:
            selector.add(handle)
    except ModelError as exc:
        reason = str(exc)
        return Model(
            "auto-split", None, handles, drift_hashes=1, drift_reason=reason, pulsar=pulsar
        )
    model = Model("auto-split", selector, handles, pulsar=pulsar)
    model.drift_hashes = differing(members, selector, handles)
    if model.drift:
        model.drift_reason = (
            "auto split ranges depend on past joins and leaves; joining the connected "
            "consumers in order gives other ranges (expected after a consumer left)"
        )
    return model


def seeded_auto_split(
    members: Sequence[Member], *, pulsar: PulsarLine = "4.0"
) -> tuple[AutoSplitSelector, list[Consumer]]:
    """An auto split selector in exactly the observed state (one range end per consumer)."""
    handles = [Consumer(m.name) for m in members]
    owners = [
        (handle, end)
        for member, handle in zip(members, handles, strict=True)
        for _, end in member.ranges
    ]
    return AutoSplitSelector.from_range_ends(owners, pulsar=pulsar), handles


def seeded_sticky(
    members: Sequence[Member], *, pulsar: PulsarLine = "4.0"
) -> tuple[StickySelector | None, list[Consumer]]:
    """A sticky selector holding the observed ranges (None if they overlap)."""
    handles = [Consumer(m.name, m.ranges) for m in members]
    try:
        return StickySelector.holding(handles, pulsar=pulsar), handles
    except ModelError:
        return None, handles


def rebuild(
    kind: Kind,
    members: Sequence[Member],
    *,
    points: int = 0,
    pulsar: PulsarLine = "4.0",
    charset: str = "utf-8",
) -> Model:
    """The model of a subscription whose selector is `kind`, on a broker of line `pulsar`
    whose JVM encodes consumer names in `charset`."""
    if kind == "consistent" and pulsar == "3.0":
        return rebuild_consistent_3_0(members, points=points, charset=charset)
    if kind == "consistent":
        return rebuild_consistent(members, points=points)
    if kind == "auto-split":
        return rebuild_auto_split(members, pulsar=pulsar)
    if kind == "sticky":
        selector, handles = seeded_sticky(members, pulsar=pulsar)
        return Model("sticky", selector, handles, pulsar=pulsar)
    note = (
        "not modelled: the ranges fit no selector of the brokers' line (no ranges, or 31-bit "
        "ranges as 4.0.7's classic dispatcher reports them)"
    )
    return Model(kind, None, [Consumer(m.name) for m in members], points_note=note, pulsar=pulsar)


@dataclass(frozen=True)
class WhatIf:
    """One change applied to a subscription: its handles before and after, and the moves."""

    change: str
    handles: list[Consumer]  # everyone involved: the members, then a consumer added
    before: Assignments
    after: Assignments
    moves: tuple[RangeMove, ...]
    space: tuple[int, int] = (ROUTABLE_LOW, ROUTABLE_HIGH)  # the hashes counted (`Model.space`)

    def moved_hashes(self) -> int:
        low, high = self.space
        return routable_count(((m.start, m.end) for m in self.moves), low=low, high=high)

    def space_size(self) -> int:
        return self.space[1] - self.space[0] + 1


def what_if_basis(
    model: Model, members: Sequence[Member]
) -> tuple[Selector | None, list[Consumer]]:
    """A fresh selector for a what-if: the model's state, or the observed one for auto split
    (whose rebuild cannot know past leaves) and sticky."""
    if model.kind == "auto-split":
        return seeded_auto_split(members, pulsar=model.pulsar)
    if model.kind == "sticky":
        return seeded_sticky(members, pulsar=model.pulsar)
    if model.kind == "consistent" and model.points and model.pulsar == "3.0":
        charset = _charset(model)
        return replay_3_0(members, model.name_indexes, model.points, model.handles, charset)
    if model.kind == "consistent" and model.points:
        charset = _charset(model)
        return replay_consistent(
            members, model.name_indexes, model.points, model.handles, charset=charset
        )
    return None, list(model.handles)


def _charset(model: Model) -> str:
    """How the model's broker encodes consumer names (its ring's encoding)."""
    return str(getattr(model.selector, "name_encoding", "utf-8"))


def apply_what_if(
    model: Model,
    members: Sequence[Member],
    *,
    add: str = "",
    remove: str = "",
    points: int = 0,
) -> WhatIf | None:
    """Add a consumer named `add`, remove the last connected one named `remove`, or change
    the replica points; None when the change means nothing for this selector."""
    selector, handles = what_if_basis(model, members)
    if selector is None:
        return None
    before = selector.assignments()
    if add:
        if model.kind == "sticky":
            return None  # a sticky consumer brings its own ranges
        newcomer = Consumer(add)
        selector.add(newcomer)
        return _what_if(
            f"add {add}", [*handles, newcomer], before, selector.assignments(), model.space
        )
    if remove:
        named = [h for h in handles if h.name == remove]
        if not named:
            return None
        selector.remove(named[-1])
        return _what_if(f"remove {remove}", handles, before, selector.assignments(), model.space)
    if points and model.kind == "consistent":
        indexes, charset = model.name_indexes, _charset(model)
        changed: Selector
        if model.pulsar == "3.0":
            changed, _ = replay_3_0(members, indexes, points, handles, charset)
        else:
            changed, _ = replay_consistent(members, indexes, points, handles, charset=charset)
        after = changed.assignments()
        return _what_if(f"replica points {points}", handles, before, after, model.space)
    return None


def _what_if(
    change: str,
    handles: list[Consumer],
    before: Assignments,
    after: Assignments,
    space: tuple[int, int] = (ROUTABLE_LOW, ROUTABLE_HIGH),
) -> WhatIf:
    return WhatIf(change, handles, before, after, diff_assignments(before, after), space)
