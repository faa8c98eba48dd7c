"""The scale harness (`reliability/scale.py`) at 5,000 topics and two polls: the real
`pulsar-lens collect` process polls the synthetic cluster over loopback HTTP, and the store
holds every topic, subscription and consumer each poll was served, and a result of every
light analysis for the last poll; every page is timed cold and reports a figure. Correctness
only: no figure is compared with a time (`make scale` runs the sizes that matter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reliability import scale

TOPICS = 5_000


@pytest.mark.timeout(1500)
def test_collect_stores_all_the_synthetic_cluster_served(tmp_path: Path) -> None:
    figures = scale.run_size(
        TOPICS,
        polls=2,
        change=0.1,
        brokers=None,
        interval=None,
        work=tmp_path,
        pages=True,
        check=True,
    )
    assert figures["problems"] == []
    server = figures["server"]
    assert server["not_found"] == {}  # every call a poll makes is one the server answers
    assert server["requests"]["broker_topic_stats"] >= 2 * 3  # each broker's own bulk answer
    generations = server["generations"]
    assert [g["generation"] for g in generations[:2]] == [0, 1]
    assert generations[1]["consumers"] != generations[0]["consumers"]  # consumers came and went
    first, second = figures["stages"]
    assert first["topics"] == second["topics"] == TOPICS
    assert second["row_counts"]["consumers"] == generations[1]["consumers"]
    assert second["row_counts"]["events"] > 0  # what changed between the polls became events
    assert all(s["write_seconds"] is not None for s in figures["stages"])
    for stage in figures["stages"]:  # the peak so far, read after the write and the analyses
        assert 0 < stage["peak_mib_after_write"] <= stage["peak_mib_after_analyses"]
    assert figures["stages"][-1]["peak_mib_after_analyses"] <= figures["collect"]["peak_rss_mib"]
    for stage in figures["stages"]:  # the whole path, poll start to stored analyses
        assert 0 < stage["poll_to_heartbeat_seconds"] <= stage["poll_to_stored_seconds"]
        # stamped when written, the results are stored before the harness sees them
        assert stage["poll_to_stored_seconds"] <= stage["poll_to_seen_seconds"]
        assert set(stage["plugins"]) >= set(scale.light_plugins())  # as each poll stored them
    assert figures["metrics"]["families"] > 0
    collect = figures["collect"]
    assert 0 < collect["peak_rss_mib"] <= collect["tree_peak_rss_mib"]
    assert 0 < collect["tree_peak_pss_mib"] <= collect["tree_peak_rss_mib"]
    pages = figures["pages"]
    assert "error" not in pages, pages.get("error")
    assert pages["problems"] == [], pages["problems"]
    from benchmarks import dashboard as bench
    from pulsar_lens.plugins.registry import discover

    assert set(pages["cold_seconds"]) == set(bench.page_list(list(discover())))


def test_a_poll_that_stored_less_than_it_was_served_is_a_problem() -> None:
    """Counted, at any size: a poll whose cluster list timed out while the server rendered its
    answers stored the topics of the listings but no subscription or consumer."""
    generations = [
        {"topics": 10, "subscriptions": 10, "consumers": 25},
        {"topics": 10, "subscriptions": 10, "consumers": 24, "waited_seconds": 0.2},
        {"topics": 10, "subscriptions": 10, "consumers": 26, "waited_seconds": 10.4},
    ]
    deferred = "per-topic stats of 5 of 10 topic(s) deferred to the next polls (at most 5)"
    row = {"errors_json": f'[{{"endpoint": "topic_stats", "message": "{deferred}"}}]'}
    assert scale.unexpected_errors(row) == []
    timed_out = {
        "endpoint": "GET /admin/v2/clusters",
        "message": "could not reach the admin API: no answer within 10s",
    }
    row3 = {"errors_json": json.dumps([timed_out])}
    stages = [
        {"poll": 1, "row_counts": {"topics": 10, "subscriptions": 10, "consumers": 25}},
        {"poll": 2, "row_counts": {"topics": 10, "subscriptions": 10, "consumers": 24}},
        {"poll": 3, "row_counts": {"topics": 10, "subscriptions": 0, "consumers": 0}},
    ]
    for stage, row_of in zip(stages, (row, row, row3), strict=True):
        stage["unexpected_errors"] = scale.unexpected_errors(row_of)
    problems = scale.served_problems(stages, generations)
    assert list(problems) == [3]  # poll 2 stored all it was served; its note is the budget's
    problem = problems[3]
    assert problem.startswith("poll 3: stored 0 of 10 subscriptions, 0 of 26 consumers; ")
    assert "GET /admin/v2/clusters: could not reach the admin API" in problem
    assert "waited 10.4 s for the server to render" in problem
    stages[1]["unexpected_errors"] = ["bundles: HTTP 500"]  # every row, yet an error
    assert scale.served_problems(stages, generations)[2] == (
        "poll 2: stored every row; its errors: bundles: HTTP 500"
    )
