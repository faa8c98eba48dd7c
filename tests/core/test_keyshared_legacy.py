"""3.0.7's consistent-hashing ring rebuilt from the ranges a 3.0 broker lists (31 bits, one
range per ring point): name indexes, replica points and drift, as `core.keyshared.legacy`
infers them."""

from __future__ import annotations

import pytest

from pulsar_lens.core.keyshared.legacy import fit_3_0, name_indexes_3_0
from pulsar_lens.core.keyshared.ranges import Member, differing_by_owner, infer_selector
from pulsar_lens.core.keyshared.rebuild import apply_what_if, rebuild
from pulsar_lens.core.legacy_selectors import LegacyConsistentSelector
from pulsar_lens.core.selectors import Consumer


def listed_members(selector: LegacyConsistentSelector, handles: list[Consumer]) -> list[Member]:
    listed = selector.listed_ranges()
    return [Member(h.name, tuple(sorted(listed.get(h, ())))) for h in handles]


def ring(points: int, names: list[str], *, rejoin_first: bool = False) -> list[Member]:
    """The members (in connection order) of a 3.0.7 ring after these joins, the first
    consumer leaving and its name rejoining when asked."""
    selector = LegacyConsistentSelector("3.0.7", points=points)
    handles = [Consumer(n) for n in names]
    for handle in handles:
        selector.add(handle)
    if rejoin_first:
        selector.remove(handles[0])
        handles = [*handles[1:], Consumer(names[0])]
        selector.add(handles[-1])  # connects last, takes the freed name index 0
    return listed_members(selector, handles)


@pytest.mark.parametrize("points", [100, 9, 150])
def test_fit_3_0_infers_points_and_reproduces_every_range(points: int) -> None:
    members = ring(points, ["alpha", "beta", "gamma"])
    fit = fit_3_0(members)
    assert (fit.points, fit.drift, fit.indexes) == (points, 0, (0, 0, 0))
    assert fit.note.startswith("inferred")


def test_fit_3_0_name_indexes_follow_a_rejoin() -> None:
    members = ring(20, ["dup", "dup", "solo", "dup"], rejoin_first=True)
    assert name_indexes_3_0(members) == (1, 0, 2, 0)
    fit = fit_3_0(members)
    assert (fit.points, fit.drift) == (20, 0)


def test_fit_3_0_counts_the_hashes_a_changed_range_moves() -> None:
    members = ring(100, ["a", "b"])
    (s, e), *rest = members[1].ranges  # hand b's first range to a
    changed = [Member("a", tuple(sorted([*members[0].ranges, (s, e)]))), Member("b", tuple(rest))]
    fit = fit_3_0(changed, points=100)
    assert fit.drift == e - s + 1 and fit.reason
    assert differing_by_owner([m.ranges for m in changed], [m.ranges for m in members]) == (
        e - s + 1,
        [e - s + 1, e - s + 1],
    )


def test_31_bit_ranges_are_3_0_consistent_hashing_only_on_3_0() -> None:
    members = ring(100, ["a", "b"])
    assert infer_selector("AUTO_SPLIT", members, pulsar="3.0") == "consistent"
    assert infer_selector("AUTO_SPLIT", members, pulsar="4.0") == "unknown"


def test_3_0_model_routes_as_its_ring_and_what_ifs_count_31_bits() -> None:
    members = ring(100, ["a", "b"])
    model = rebuild("consistent", members, pulsar="3.0")
    assert (model.pulsar, model.space, model.drift) == ("3.0", (0, 2**31 - 1), False)
    assert model.selector is not None
    for h in range(0, 2**31 - 1, 2**31 // 997):  # the hash in a member's listed range
        owner = next(m.name for m in members if any(s <= h <= e for s, e in m.ranges))
        chosen = model.selector.select(h)
        assert chosen is not None and chosen.name == owner
    joined = apply_what_if(model, members, add="c")
    assert joined is not None and 0.15 < joined.moved_hashes() / joined.space_size() < 0.5
    fewer = apply_what_if(model, members, points=9)
    assert fewer is not None and fewer.moved_hashes() > 0
