"""The seeded shuffle: a permutation fixed by its seed that keeps each module, and each group of
tests sharing a module-scoped fixture parameter, in one piece."""

from __future__ import annotations

import itertools

import pytest

from tests.shuffle import SEED_VARIABLE, shuffle_seed, shuffled

pytest_plugins = ["pytester"]

CLUSTERS = """
import pytest

@pytest.fixture(scope="module", params=["modular", "extensible"])
def cluster(request):
    return request.param

@pytest.mark.parametrize("n", range(4))
def test_drill(cluster, n):
    pass

def test_single():
    pass
"""
PLAIN = "\n".join(f"def test_{i}():\n    pass\n" for i in range(6))


@pytest.fixture
def items(pytester: pytest.Pytester) -> list[pytest.Item]:
    pytester.makepyfile(test_clusters=CLUSTERS, test_plain_a=PLAIN, test_plain_b=PLAIN)
    found, _ = pytester.inline_genitems()
    return list(found)


def runs(values: list[object]) -> int:
    """How many runs of equal neighbours `values` has."""
    return len([key for key, _ in itertools.groupby(values)])


def test_the_same_seed_gives_the_same_order_and_seeds_differ(items: list[pytest.Item]) -> None:
    orders = {seed: [i.nodeid for i in shuffled(items, seed)] for seed in range(8)}
    assert orders[3] == [i.nodeid for i in shuffled(items, 3)]
    assert all(sorted(order) == sorted(i.nodeid for i in items) for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) > 4
    assert any(order != [i.nodeid for i in items] for order in orders.values())


def test_modules_and_groups_sharing_a_module_parameter_stay_whole(
    items: list[pytest.Item],
) -> None:
    for seed in range(50):
        order = shuffled(items, seed)
        assert runs([i.path for i in order]) == 3, seed
        drills = [i for i in order if "test_drill" in i.nodeid]
        clusters = [i.callspec.params["cluster"] for i in drills]  # type: ignore[attr-defined]
        assert runs(clusters) == 2, (seed, [i.nodeid for i in order])


@pytest.mark.parametrize(("value", "seed"), [("", None), (" 42 ", 42), ("-7", -7)])
def test_the_seed_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, seed: int | None
) -> None:
    monkeypatch.setenv(SEED_VARIABLE, value)
    assert shuffle_seed() == seed


def test_a_seed_that_is_no_integer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_VARIABLE, "yes")
    with pytest.raises(pytest.UsageError, match=SEED_VARIABLE):
        shuffle_seed()
